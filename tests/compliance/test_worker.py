"""The job worker: retries, giving up, leases, and tenant-scoped reads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from control_plane.db.engine import begin_write
from control_plane.errors import NotFound
from control_plane.jobs.service import JobContext, enqueue, get_job
from control_plane.jobs.worker import Worker
from tests.support.service import ServiceWorld

from .helpers import job


def _enqueue(world: ServiceWorld, kind: str = "probe") -> Any:
    with world.runtime.sessions() as session:
        begin_write(session)
        queued = enqueue(session, world.tenant_id, kind, subject=None, params={})
        session.commit()
        return queued


def _drain(worker: Worker) -> None:
    while worker.run_once() is not None:
        pass


def test_a_failing_job_is_retried_then_marked_failed(world: ServiceWorld) -> None:
    calls: list[int] = []

    def broken(ctx: JobContext) -> dict[str, Any]:
        calls.append(ctx.attempts)
        raise ValueError("bucket said no")

    queued = _enqueue(world)
    worker = Worker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                    handlers={"probe": broken})
    _drain(worker)
    failed = job(world, queued.id)
    assert calls == [1, 2, 3]
    assert (failed.state, failed.attempts, failed.lease_owner) == ("failed", 3, None)
    assert failed.error == "ValueError: bucket said no"
    assert failed.result == {"error": "ValueError: bucket said no"}


def test_progress_saved_by_one_attempt_is_seen_by_the_next(world: ServiceWorld) -> None:
    seen: list[dict[str, Any]] = []

    def flaky(ctx: JobContext) -> dict[str, Any]:
        seen.append(dict(ctx.progress))
        if "step1" not in ctx.progress:
            ctx.commit_progress(step1=True)
            raise RuntimeError("died after step 1")
        return {"ok": True}

    queued = _enqueue(world)
    _drain(Worker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                  handlers={"probe": flaky}))
    done = job(world, queued.id)
    assert seen == [{}, {"step1": True}]
    assert (done.state, done.result, done.attempts) == ("completed", {"ok": True}, 2)


def test_a_running_job_keeps_its_lease_while_its_worker_is_alive(world: ServiceWorld) -> None:
    release = threading.Event()
    started = threading.Event()

    def slow(ctx: JobContext) -> dict[str, Any]:
        started.set()
        release.wait(10)
        return {"slow": True}

    queued = _enqueue(world)
    first = Worker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                   handlers={"probe": slow}, lease_seconds=0.3)
    thread = threading.Thread(target=first.run_once)
    thread.start()
    assert started.wait(10)
    other = Worker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                   handlers={"probe": slow}, lease_seconds=0.3)
    # three lease lengths later the heartbeat has kept it: nothing for another worker
    threading.Event().wait(0.9)
    assert other.run_once() is None
    release.set()
    thread.join(10)
    assert job(world, queued.id).state == "completed"


def test_another_tenants_job_is_not_found(world: ServiceWorld) -> None:
    from control_plane.audit.service import Actor
    from control_plane.tenants.service import create_tenant

    queued = _enqueue(world)
    with world.runtime.sessions() as session:
        other, _ = create_tenant(session, "other")
        assert get_job(session, world.actor, queued.id).id == queued.id
        with pytest.raises(NotFound):
            get_job(session, Actor(other.id, "api", "x"), queued.id)
