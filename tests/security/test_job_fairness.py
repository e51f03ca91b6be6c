"""Jobs are scheduled fairly across tenants: one tenant's long queue delays another tenant's
job by at most one job, and several workers still never claim the same job.

Deterministic: the tests claim with the worker's own claim function (``JobWorker.claim``, or
``run_once`` with handlers that return at once) under a clock that moves one second per
call; nothing sleeps. The runtime has a database of its own, with no server worker on it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from control_plane.compliance import service as compliance
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from control_plane.jobs.service import JobContext
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.jobs import close_runnable_jobs
from tests.support.service import isolated_database, make_settings


@pytest.fixture(scope="module")
def runtime(database: str, request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    url = isolated_database(database, request)
    # Room for a long queue, claimed without running: these tests are about the order.
    built = Runtime(make_settings(url, tmp_path_factory.mktemp("fairness"),
                                  job_tenant_quota=100, job_tenant_concurrency=100))
    if url == "sqlite":
        built.migrate()
    try:
        yield built
    finally:
        built.close()


@pytest.fixture(autouse=True)
def nothing_left_runnable(runtime: Runtime) -> Iterator[None]:
    """Each test sees only its own jobs: whatever another test left runnable is closed."""
    close_runnable_jobs(runtime)
    yield
    close_runnable_jobs(runtime)


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.now += timedelta(seconds=1)
            return self.now


def _tenant(runtime: Runtime, name: str) -> Actor:
    with runtime.sessions() as session:
        created, _ = create_tenant(session, f"{name}-{uuid.uuid4().hex[:8]}")
    return Actor(created.id, "api", "officer")


def _exports(runtime: Runtime, actor: Actor, n: int) -> list[uuid.UUID]:
    with runtime.sessions() as session:
        return [compliance.start_export(session, actor, f"user-{i}", "json").id
                for i in range(n)]


def _erasure(runtime: Runtime, actor: Actor) -> uuid.UUID:
    with runtime.sessions() as session:
        return compliance.start_erasure(session, actor, "user-b", dry_run=False).id


def _instant(ctx: JobContext) -> dict[str, Any]:
    return {"ran": ctx.kind}


def _worker(runtime: Runtime, clock: Ticks) -> JobWorker:
    # Leases far longer than the ticks a test takes: no claim is ever a takeover here.
    return JobWorker(runtime.sessions, runtime.plane, runtime.settings, clock=clock,
                     handlers={"export": _instant, "erase": _instant}, lease_seconds=3600)


def test_another_tenants_erasure_is_claimed_within_two_claims_after_50_exports(
        runtime: Runtime) -> None:
    a, b = _tenant(runtime, "a"), _tenant(runtime, "b")
    a_jobs = _exports(runtime, a, 50)
    b_job = _erasure(runtime, b)
    worker = _worker(runtime, Ticks())

    claimed = []
    for _ in range(2):
        job = worker.claim()
        assert job is not None
        claimed.append(job.id)
    assert claimed == [a_jobs[0], b_job]
    # A's queue then continues in its own order
    rest = [job.id for job in iter(worker.claim, None)]
    assert rest == a_jobs[1:]


def test_a_worker_running_jobs_to_the_end_serves_the_waiting_tenant_next(
        runtime: Runtime) -> None:
    a, b = _tenant(runtime, "a"), _tenant(runtime, "b")
    a_jobs = _exports(runtime, a, 50)
    b_job = _erasure(runtime, b)
    worker = _worker(runtime, Ticks())

    ran = [worker.run_once() for _ in range(3)]
    assert ran == [a_jobs[0], b_job, a_jobs[1]]


def test_tenants_take_turns(runtime: Runtime) -> None:
    tenants = [_tenant(runtime, name) for name in ("a", "b", "c")]
    queued = {actor.tenant_id: _exports(runtime, actor, 3) for actor in tenants}
    worker = _worker(runtime, Ticks())

    order = [job.tenant_id for job in iter(worker.claim, None)]
    ids = [actor.tenant_id for actor in tenants]
    assert order == ids * 3
    assert sum(len(jobs) for jobs in queued.values()) == 9


def test_a_tenant_never_served_goes_before_one_served_earlier(runtime: Runtime) -> None:
    a = _tenant(runtime, "a")
    clock = Ticks()
    worker = _worker(runtime, clock)
    first = _exports(runtime, a, 1)
    assert worker.run_once() == first[0]
    later_a = _exports(runtime, a, 2)
    b = _tenant(runtime, "b")
    b_job = _erasure(runtime, b)  # queued after A's two
    assert [job.id for job in iter(worker.claim, None)] == [b_job, *later_a]


@pytest.mark.databases("postgres")
def test_concurrent_workers_never_claim_the_same_job(runtime: Runtime) -> None:
    tenants = [_tenant(runtime, name) for name in ("a", "b", "c")]
    queued = {job for actor in tenants for job in _exports(runtime, actor, 20)}
    clock = Ticks()
    claims: list[list[uuid.UUID]] = [[] for _ in range(6)]
    start = threading.Barrier(len(claims))

    def claim_all(mine: list[uuid.UUID]) -> None:
        worker = _worker(runtime, clock)
        start.wait()
        while (job := worker.claim()) is not None:
            mine.append(job.id)

    threads = [threading.Thread(target=claim_all, args=(mine,)) for mine in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    everything = [job for mine in claims for job in mine]
    assert len(everything) == len(set(everything)) == 60
    assert set(everything) == queued
