"""The job worker: retries, giving up, leases, and tenant-scoped reads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from control_plane.db.engine import begin_write, make_engine
from control_plane.db.migrate import upgrade
from control_plane.errors import NotFound
from control_plane.job_handlers import JobWorker
from control_plane.jobs.service import JobContext, enqueue, get_job
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.clock import DEADLINE_SECONDS, Beats, ManualWallClock, wait_until
from tests.support.service import ServiceWorld, make_settings

from .helpers import job

LEASE = 3600.0  # long enough that no real-time wait ever matters; the clock is moved


@pytest.fixture
def own_world(database: str, request: pytest.FixtureRequest,
              tmp_path: Path) -> Iterator[ServiceWorld]:
    """A database of its own: the lease tests move the clock hours ahead, where a job another
    test left in the shared database would become claimable and run by the wrong worker (and
    a job left queued here would be claimed by another test's worker)."""
    url = database
    if database != "sqlite":
        url = request.getfixturevalue("postgres").create_database()
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
    runtime = Runtime(make_settings(url, tmp_path))
    if url == "sqlite":
        runtime.migrate()
    try:
        with runtime.sessions() as session:
            created, _ = create_tenant(session, "leases")
        yield ServiceWorld(runtime, created.id)
    finally:
        runtime.close()

def _enqueue(world: ServiceWorld, kind: str = "probe") -> Any:
    with world.runtime.sessions() as session:
        begin_write(session)
        queued = enqueue(session, world.tenant_id, kind, subject=None, params={})
        session.commit()
        return queued


def _drain(worker: JobWorker) -> None:
    while worker.run_once() is not None:
        pass


def test_a_failing_job_is_retried_then_marked_failed(world: ServiceWorld) -> None:
    calls: list[int] = []

    def broken(ctx: JobContext) -> dict[str, Any]:
        calls.append(ctx.attempts)
        raise ValueError("bucket said no")

    queued = _enqueue(world)
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                       handlers={"probe": broken})
    _drain(worker)
    failed = job(world, queued.id)
    assert calls == [1, 2, 3]
    assert (failed.state, failed.attempts, failed.lease_owner) == ("failed", 3, None)
    assert failed.error == "ValueError: bucket said no"
    assert failed.result == {"error": "ValueError: bucket said no"}


def test_a_failed_attempt_is_logged_with_its_causes_names_and_no_message(
        world: ServiceWorld, caplog: pytest.LogCaptureFixture) -> None:
    """The warning names the error and what caused it (a storage error's cause tells a
    timeout from a dropped connection), never a message: one may name a path or a bucket."""
    def broken(ctx: JobContext) -> dict[str, Any]:
        try:
            raise TimeoutError("s3://secret-bucket/tenants/x timed out")
        except TimeoutError as exc:
            raise ConnectionError("tenants/x/memories/k.json unreachable") from exc

    queued = _enqueue(world)
    worker = JobWorker(world.runtime.sessions, world.runtime.plane,
                       world.runtime.settings.model_copy(update={"job_max_attempts": 1}),
                       handlers={"probe": broken})
    with caplog.at_level("WARNING", logger="control_plane.jobs.worker"):
        _drain(worker)
    lines = [r.getMessage() for r in caplog.records if r.name == "control_plane.jobs.worker"]
    assert lines == [f"job {queued.id} attempt 1 failed: ConnectionError <- TimeoutError"]


def test_progress_saved_by_one_attempt_is_seen_by_the_next(world: ServiceWorld) -> None:
    seen: list[dict[str, Any]] = []

    def flaky(ctx: JobContext) -> dict[str, Any]:
        seen.append(dict(ctx.progress))
        if "step1" not in ctx.progress:
            ctx.commit_progress(step1=True)
            raise RuntimeError("died after step 1")
        return {"ok": True}

    queued = _enqueue(world)
    _drain(JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                     handlers={"probe": flaky}))
    done = job(world, queued.id)
    assert seen == [{}, {"step1": True}]
    assert (done.state, done.result, done.attempts) == ("completed", {"ok": True}, 2)


def test_a_running_job_keeps_its_lease_while_its_worker_is_alive(
        own_world: ServiceWorld) -> None:
    world = own_world
    # Time is a manual clock and each lease renewal waits for the test to release it, so
    # nothing here depends on how fast this machine is.
    clock, beats = ManualWallClock(), Beats()
    release, started = threading.Event(), threading.Event()

    def slow(ctx: JobContext) -> dict[str, Any]:
        started.set()
        assert release.wait(DEADLINE_SECONDS)
        return {"slow": True, "lost": ctx.lost()}

    queued = _enqueue(world)
    first = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                      handlers={"probe": slow}, lease_seconds=LEASE, clock=clock, pause=beats)
    other = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                      handlers={"probe": slow}, lease_seconds=LEASE, clock=clock)
    thread = threading.Thread(target=first.run_once)
    thread.start()
    try:
        assert started.wait(DEADLINE_SECONDS)
        beats.wait_for_pauses(1)
        assert beats.asked == [LEASE / 3]  # it renews every third of the lease
        assert job(world, queued.id).lease_expires_at == clock.start + timedelta(seconds=LEASE)
        for beat in range(1, 10):  # nine beats, a third of a lease apart: three leases long
            clock.advance(LEASE / 3)
            beats.release()
            beats.wait_for_pauses(beat + 1)
            renewed = job(world, queued.id)
            assert renewed.lease_expires_at == clock.now + timedelta(seconds=LEASE)
            assert (renewed.state, renewed.lease_owner) == ("running", first.owner)
        clock.advance(LEASE - 1)  # past every lease but the last renewal's
        assert clock.now == clock.start + timedelta(seconds=4 * LEASE - 1)
        assert other.run_once() is None  # nothing for another worker
    finally:
        release.set()
        thread.join(DEADLINE_SECONDS)
    done = job(world, queued.id)
    assert (done.state, done.attempts, done.lease_owner) == ("completed", 1, None)
    assert done.result == {"slow": True, "lost": False}


def test_a_lease_not_renewed_is_taken_over_and_its_worker_told(
        own_world: ServiceWorld) -> None:
    world = own_world
    clock, beats = ManualWallClock(), Beats()
    release, started = threading.Event(), threading.Event()
    seen: list[bool] = []
    contexts: list[JobContext] = []

    def stuck(ctx: JobContext) -> dict[str, Any]:
        contexts.append(ctx)
        started.set()
        assert release.wait(DEADLINE_SECONDS)
        seen.append(ctx.lost())
        return {"stuck": True}

    queued = _enqueue(world)
    first = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                      handlers={"probe": stuck}, lease_seconds=LEASE, clock=clock, pause=beats)
    other = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                      handlers={"probe": stuck}, lease_seconds=LEASE, clock=clock)
    thread = threading.Thread(target=first.run_once)
    thread.start()
    try:
        assert started.wait(DEADLINE_SECONDS)
        beats.wait_for_pauses(1)  # the heartbeat waits for a beat the test does not release
        clock.advance(LEASE)  # the lease ends exactly now: not yet expired
        assert other.claim() is None
        clock.advance(0.5)
        taken = other.claim()
        assert taken is not None and taken.id == queued.id
        assert (taken.attempts, taken.lease_owner) == (2, other.owner)
        beats.release()  # the old heartbeat's next renewal finds the lease gone
        wait_until(contexts[0].lost, "the old heartbeat noticing the takeover")
    finally:
        release.set()
        thread.join(DEADLINE_SECONDS)
    assert seen == [True]
    after = job(world, queued.id)  # the first worker's result is not recorded over the takeover
    assert (after.state, after.lease_owner, after.attempts) == ("running", other.owner, 2)
    assert after.result is None
    assert beats.pauses == 1  # a lost lease is not renewed again


def test_another_tenants_job_is_not_found(own_world: ServiceWorld) -> None:
    from control_plane.identity import Actor

    world = own_world  # its job stays queued: not in the shared database, for other workers

    queued = _enqueue(world)
    with world.runtime.sessions() as session:
        other, _ = create_tenant(session, "other")
        assert get_job(session, world.actor, queued.id).id == queued.id
        with pytest.raises(NotFound):
            get_job(session, Actor(other.id, "api", "x"), queued.id)


def test_the_worker_purges_idempotency_answers_past_their_retention(
        own_world: ServiceWorld) -> None:
    """Stored answers of idempotent writes may name a data subject; the worker's sweep
    deletes those older than 24 hours and keeps the fresh ones."""
    from sqlalchemy import select

    from control_plane.db.base import utcnow
    from control_plane.db.models import IdempotentResponse

    runtime = own_world.runtime
    with runtime.sessions() as session:
        begin_write(session)
        for key, age in (("old", timedelta(hours=24, seconds=1)), ("fresh", timedelta(hours=23))):
            session.add(IdempotentResponse(
                tenant_id=own_world.tenant_id, accessor_id="key:test", key=key,
                fingerprint="0" * 64, status_code=200,
                response={"user_id": "u-1"}, created_at=utcnow() - age))
        session.commit()
    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings, owner="purge-test")
    assert worker.purge_idempotency() == 1
    with runtime.sessions() as session:
        assert list(session.scalars(select(IdempotentResponse.key))) == ["fresh"]
