"""Shared thread pools and the process's budget of threads in tenants' buckets, on their own
(control_plane/plane/shared_pool.py, budget.py): a tenant's stuck work takes at
most its share of a pool and never queues another tenant's behind it; work handed to a pool
carries its tenant's slot; tenants whose buckets hang share one part of the budget."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import wait
from pathlib import Path

import pytest

from control_plane.plane.budget import StorageCrowded
from control_plane.plane.bulkhead import BulkheadedAdapter, Bulkheads, StorageBusy
from control_plane.plane.shared_pool import SharedPool
from storage_adapters.local import LocalAdapter

A, B = uuid.uuid4(), uuid.uuid4()
GUARD = 30  # seconds: a guard against hanging, not a measurement
CROWDED = ("too many storage calls of this server are waiting on slow buckets (at most 6 in "
           "all tenants' buckets per server process, the last 2 kept for tenants with fewer "
           "than 2 in theirs), and this tenant already has calls under way: retry later, with "
           "fewer requests at once")


@pytest.fixture
def pool() -> Iterator[SharedPool]:
    shared = SharedPool(4, "test-shared", share=2)
    yield shared
    shared.shutdown()


def test_a_tenants_stuck_work_takes_its_share_and_others_never_queue_behind_it(
        pool: SharedPool) -> None:
    stuck = threading.Event()

    def hang(n: int) -> str:
        stuck.wait(GUARD)
        return threading.current_thread().name

    def where(n: int) -> str:
        return threading.current_thread().name

    here = threading.current_thread().name
    hung = [pool.submit(A, None, hang, n) for n in range(2)]  # A's share, both stuck
    assert (pool.busy, pool.running(A)) == (2, 2)
    try:
        # A's third would wait for a worker of A's share: it runs in A's own thread instead
        third: list[str] = []
        caller = threading.Thread(target=lambda: third.append(pool.submit(A, None, hang,
                                                                          2).result()))
        caller.start()
        # B's work goes to the idle workers, then (the pool full) runs in B's thread, at once
        b_go = threading.Event()
        b_pooled = [pool.submit(B, None, lambda n: b_go.wait(GUARD) and where(n), n)
                    for n in range(2)]
        assert (pool.busy, pool.running(B)) == (4, 2)
        b_here = pool.submit(B, None, where, 2)
        assert b_here.done() and b_here.result() == here
        b_go.set()
        wait(b_pooled, GUARD)
        assert [f.result().startswith("test-shared") for f in b_pooled] == [True, True]
        assert (pool.busy, pool.running(A)) == (2, 2)  # A's two still stuck
        assert not any(f.done() for f in hung)
        # map: answers in order, wherever they ran
        assert pool.map(B, None, lambda n: n * n, range(6)) == [0, 1, 4, 9, 16, 25]
    finally:
        stuck.set()
    caller.join(GUARD)
    assert third == [caller.name]
    assert [f.result(GUARD).startswith("test-shared") for f in hung] == [True, True]
    assert (pool.busy, pool.running(A), pool.running(B)) == (0, 0, 0)


def test_work_handed_to_a_pool_carries_its_tenants_slot(pool: SharedPool,
                                                        tmp_path: Path) -> None:
    bulkheads = Bulkheads(calls=2, waiters=0, wait_seconds=0)
    bulkhead = bulkheads.of(A)
    local = LocalAdapter(tmp_path / "bucket")
    local.put("a/one.json", b"1")
    guarded = BulkheadedAdapter(local, bulkhead, lambda: None)
    seen: list[tuple[int, bytes]] = []
    inside = threading.Event()
    go = threading.Event()

    def read(n: int) -> None:
        got = guarded.get("a/one.json")  # takes no second slot: it holds the one handed over
        seen.append((bulkhead.running, got))
        inside.set()
        go.wait(GUARD)

    handed = pool.submit(A, bulkheads, read, 0)
    assert inside.wait(GUARD)
    assert seen == [(1, b"1")] and bulkhead.running == 1
    bulkhead.acquire()  # the bulkhead full: the next task is not handed over ...
    try:
        refused = pool.submit(A, bulkheads, lambda n: guarded.get("a/one.json"), 1)
        assert refused.done() and pool.busy == 1  # ... but run and refused here, at once
        with pytest.raises(StorageBusy):
            refused.result()
    finally:
        bulkhead.release()
        go.set()
    wait([handed], GUARD)
    assert handed.result() is None
    assert (bulkhead.running, bulkheads.budget.total, pool.busy) == (0, 0, 0)
    local.close()


def test_tenants_with_hanging_buckets_share_part_of_the_budget_and_leave_the_reserve() -> None:
    bulkheads = Bulkheads(calls=8, waiters=8, wait_seconds=5, threads=6, reserved=2)
    hostile, healthy, third, fourth = (bulkheads.of(uuid.uuid4()) for _ in range(4))
    for _ in range(4):
        hostile.acquire()  # the shared part, held by calls that hang
    with pytest.raises(StorageCrowded) as crowded:
        hostile.acquire()  # it holds two or more: the reserve is not for it
    assert (hostile.running, hostile.waiting, bulkheads.budget.total) == (4, 0, 4)

    assert fourth.try_acquire()  # one handed to a pool: room is left for its own call
    assert not fourth.try_acquire()  # a second would leave it none
    fourth.acquire()  # its own call
    assert bulkheads.budget.total == 6
    with pytest.raises(StorageCrowded):
        healthy.acquire()  # the budget spent
    fourth.release()
    fourth.release()

    healthy.acquire()
    healthy.acquire()  # a tenant holding fewer than two takes from the reserve
    with pytest.raises(StorageCrowded):
        healthy.acquire()
    with pytest.raises(StorageCrowded):
        third.acquire()  # all six taken
    hostile.release()
    third.acquire()  # one given back: a light tenant takes it
    assert (bulkheads.budget.total, hostile.running, healthy.running, third.running) == (
        6, 3, 2, 1)
    error = crowded.value
    assert isinstance(error, StorageBusy)
    assert (error.status_code, error.body(), error.headers) == (
        503, {"error": "storage_unavailable", "detail": CROWDED, "problem": "storage_busy"},
        {"Retry-After": "2"})


def test_deferred_work_waits_for_its_tenants_next_free_worker_or_its_caller(
        pool: SharedPool) -> None:
    """``defer``: a task finding no room is kept, not run at once; the first of the tenant's
    own workers to finish runs it, or the caller when it asks first; another tenant's worker
    never does, and a cancelled one never runs."""
    here = threading.current_thread().name
    a_go, b_go = threading.Event(), threading.Event()

    def a_hold(n: int) -> str:
        a_go.wait(GUARD)
        return threading.current_thread().name

    def where(n: int) -> str:
        return threading.current_thread().name

    held = [pool.submit(A, None, a_hold, n) for n in range(2)]  # A's share
    b_held = pool.submit(B, None, lambda n: b_go.wait(GUARD) and where(n), 0)
    kept = [pool.submit(A, None, where, n, defer=True) for n in range(4)]
    assert not any(f.done() for f in kept)  # kept, not run in the caller at submit
    assert kept[1].cancel()
    # B's worker finishes: it leaves A's kept work alone
    b_go.set()
    assert b_held.result(GUARD).startswith("test-shared")
    _until(lambda: pool.running(B) == 0)  # its worker left, after answering
    assert not any(f.done() for f in (kept[0], kept[2], kept[3]))
    # the caller asks for the first before any of A's workers is free: it runs it here
    assert kept[0].result(GUARD) == here
    # A's workers free up: they run the rest, skipping the cancelled one, then leave
    a_go.set()
    assert [f.result(GUARD).startswith("test-shared") for f in held] == [True, True]
    assert [kept[n].result(GUARD).startswith("test-shared") for n in (2, 3)] == [True, True]
    assert kept[1].cancelled()
    _until(lambda: pool.busy == 0)
    assert (pool.busy, pool.running(A), pool.running(B)) == (0, 0, 0)


def test_a_deferred_task_runs_once_and_its_failure_reaches_the_caller(
        pool: SharedPool) -> None:
    runs: list[int] = []
    go = threading.Event()

    def hold(n: int) -> None:
        go.wait(GUARD)

    def fail(n: int) -> None:
        runs.append(n)
        raise ValueError(f"task {n} failed")

    held = [pool.submit(A, None, hold, n) for n in range(2)]
    failing = pool.submit(A, None, fail, 7, defer=True)
    with pytest.raises(ValueError, match="task 7 failed"):
        failing.result(GUARD)  # run here, by the caller
    go.set()
    wait(held, GUARD)
    with pytest.raises(ValueError, match="task 7 failed"):
        failing.result(GUARD)  # asked again: the same answer, not a second run
    assert runs == [7]


def _until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GUARD
    while not done() and time.monotonic() < deadline:
        time.sleep(0.005)
