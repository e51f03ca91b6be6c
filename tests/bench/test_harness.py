"""The bench's timing helpers: each thread runs its own operation, built before the clock
starts; rounds rotate so each system goes first in turn; ratios pair systems round by round."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from bench.harness import (
    Measurement,
    alternate,
    measure,
    ratio_of_rounds,
    rotated,
    summarize,
)


def test_each_thread_runs_its_own_operation_and_every_index_runs_once() -> None:
    calls: dict[int, list[int]] = {0: [], 1: [], 2: []}
    lock = threading.Lock()

    def op_of(t: int) -> Callable[[int], None]:
        def op(i: int) -> None:
            with lock:
                calls[t].append(i)
        return op

    result = measure(lambda i: None, 30, 3, per_thread=[op_of(t) for t in range(3)])
    assert result.ops == 30
    assert sorted(i for done in calls.values() for i in done) == list(range(30))


def test_setup_builds_one_operation_per_thread_before_any_runs() -> None:
    built: list[int] = []
    ran_after: list[int] = []

    def setup() -> Callable[[int], object]:
        built.append(1)
        return lambda i: ran_after.append(len(built))

    measure(lambda i: None, 8, 4, setup=setup)
    assert len(built) == 4
    assert ran_after == [4] * 8  # every operation ran once all four were built


def test_an_operation_that_fails_fails_the_measurement() -> None:
    def boom(i: int) -> None:
        raise ValueError(f"op {i} failed")

    with pytest.raises(ValueError, match="failed"):
        measure(boom, 5, 2)


def test_too_few_operations_for_the_threads_is_refused() -> None:
    with pytest.raises(ValueError, match="2 threads need 2 operations, 1 given"):
        measure(lambda i: None, 4, 2, per_thread=[lambda i: None])


def test_each_system_goes_first_in_turn() -> None:
    assert [rotated(["a", "b", "c"], r) for r in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    order: list[str] = []

    def run(name: str) -> Callable[[int], Measurement]:
        def one(r: int) -> Measurement:
            order.append(f"{name}{r}")
            return Measurement(1, 1.0, 0.0, 0.0)
        return one

    got = alternate({"x": run("x"), "y": run("y")}, 3)
    assert order == ["x0", "y0", "y1", "x1", "x2", "y2"]
    assert [len(v) for v in got.values()] == [3, 3]

    order.clear()
    alternate({"x": run("x"), "y": run("y")}, 2, between=lambda: order.append("|"))
    assert order == ["|", "x0", "|", "y0", "|", "y1", "|", "x1"]


def test_ratios_pair_rounds_and_summaries_give_median_and_spread() -> None:
    mine = [Measurement(100, s, 0, 0) for s in (1.0, 2.0, 4.0)]  # 100, 50, 25 ops/s
    floor = [Measurement(200, s, 0, 0) for s in (1.0, 2.0, 4.0)]  # 200, 100, 50 ops/s
    assert ratio_of_rounds(mine, floor).json() == {"median": 0.5, "min": 0.5, "max": 0.5,
                                                   "spread": 0.0}
    summary = summarize([3.0, 1.0, 2.0])
    assert (summary.median, summary.low, summary.high, summary.spread) == (2.0, 1.0, 3.0, 1.0)


def test_a_sustained_rate_counts_the_settle_tail_and_the_answered_rate_does_not() -> None:
    m = Measurement(300, 1.0, 0, 0).settled(0.5)
    assert (m.per_second, m.sustained_per_second, m.settle_seconds) == (300.0, 200.0, 0.5)
    assert Measurement(10, 0.0, 0, 0).sustained_per_second == 0.0


def test_ratios_can_scale_items_and_compare_sustained_rates() -> None:
    # batches of 100 items: 10 batches/s against 500 single items/s is 2.0x in items
    batches = [Measurement(10, 1.0, 0, 0), Measurement(10, 2.0, 0, 0)]
    singles = [Measurement(500, 1.0, 0, 0), Measurement(500, 4.0, 0, 0)]
    assert ratio_of_rounds(batches, singles, scale=100).json() == {
        "median": 3.0, "min": 2.0, "max": 4.0, "spread": 0.667}
    # answered alike, but one side's tail doubles its time: 0.5x sustained
    tailed = [Measurement(100, 1.0, 0, 0).settled(1.0)]
    plain = [Measurement(100, 1.0, 0, 0).settled(0.0)]
    assert ratio_of_rounds(tailed, plain).median == 1.0
    assert ratio_of_rounds(tailed, plain, sustained=True).median == 0.5
