"""The sustained write case: each round is timed until the server settled, the two systems'
figures (answered and sustained) and the bar's ratio come from the rounds exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator

from bench import sustained
from bench.harness import Measurement


def test_timed_adds_how_long_the_settle_took_after_the_operations() -> None:
    ticks: Iterator[float] = iter([10.0, 10.75])
    calls: list[str] = []

    def run() -> Measurement:
        calls.append("run")
        return Measurement(64, 2.0, 1.0, 3.0)

    got = sustained.timed(lambda: calls.append("settle"), run, clock=lambda: next(ticks))
    assert calls == ["run", "settle"]  # settled after the operations, never before
    assert got == Measurement(64, 2.0, 1.0, 3.0, settle_seconds=0.75)


def _round(ops: int, seconds: float, settle: float) -> Measurement:
    return Measurement(ops, seconds, 0.0, 0.0).settled(settle)


def test_the_entry_reports_both_figures_and_medians_of_per_round_ratios() -> None:
    runs = {  # search: 800 writes answered in 2 s, settled 0.5 s / 2 s / 6 s later
        "search": [_round(800, 2.0, 0.5), _round(800, 2.0, 2.0), _round(800, 4.0, 6.0)],
        # no search: answered at the same pace, sealed 0.5 s after
        "no_search": [_round(800, 2.0, 0.5), _round(800, 1.0, 0.6), _round(800, 2.0, 0.5)],
    }
    e = sustained.entry(runs, 800)
    assert (e["memplane"], e["no_search"]) == (200.0, 320.0)  # 800 / 4 s; 800 / 2.5 s
    assert (e["memplane_settled_excluded"], e["no_search_settled_excluded"]) == (400.0, 400.0)
    assert e["settle_seconds"] == {"search": 2.0, "no_search": 0.5}
    # per round, sustained: 320/320, 200/500, 80/320 -> 1.0, 0.4, 0.25
    assert e["vs_no_search"] == {"median": 0.4, "min": 0.25, "max": 1.0, "spread": 1.875}
    # per round, answered: 400/400, 400/800, 200/400 -> 1.0, 0.5, 0.5
    assert e["vs_no_search_settled_excluded"]["median"] == 0.5
    assert (e["rounds"], e["ops_per_round"], e["unit"]) == (3, 800, "ops/s")


def test_the_no_search_writes_are_the_same_writes_marked_unsearchable() -> None:
    search, plain = (json.loads(sustained.BODIES[k]) for k in ("search", "no_search"))
    assert plain == search | {"searchable": False}
    assert sustained.ops_per_round(True) == 800 and sustained.ops_per_round(False) == 4000
