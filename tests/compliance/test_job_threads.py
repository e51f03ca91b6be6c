"""MEMPLANE_JOB_THREADS: a process runs that many jobs side by side, so one tenant's long
export does not hold up another tenant's erasure. Forced with a barrier: two jobs that each
wait for the other complete only if both run at once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.compliance import service as compliance
from control_plane.db.models import Job
from control_plane.identity import Actor
from control_plane.jobs.service import JobContext
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.service import isolated_database, make_settings

TERMINAL = ("completed", "failed")


@pytest.fixture
def runtime_of(database: str, request: pytest.FixtureRequest,
               tmp_path: Path) -> Iterator[Any]:
    """A runtime on a database of its own with the given job threads (one attempt per job,
    so a job that fails stays failed)."""
    built: list[Runtime] = []

    def make(threads: int) -> Runtime:
        url = isolated_database(database, request)
        runtime = Runtime(make_settings(url, tmp_path / f"jobs{threads}", job_threads=threads,
                                        job_max_attempts=1, job_poll_interval_seconds=0.05))
        if url == "sqlite":
            runtime.migrate()
        built.append(runtime)
        return runtime

    yield make
    for runtime in built:
        runtime.close()


def _export(runtime: Runtime) -> uuid.UUID:
    with runtime.sessions() as session:
        tenant, _ = create_tenant(session, f"jobs-{uuid.uuid4().hex[:8]}")
        return compliance.start_export(session, Actor(tenant.id, "api", "officer"), "user-1",
                                       "json").id


def _ends(runtime: Runtime, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[str, Any]]:
    """Each job's (state, result) once every one has ended (within 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        with runtime.sessions() as session:
            jobs = {job.id: (job.state, job.result) for job in session.scalars(
                select(Job).where(Job.id.in_(ids)))}
        if all(state in TERMINAL for state, _ in jobs.values()) or time.monotonic() > deadline:
            return jobs
        time.sleep(0.05)


def _meeting(wait_s: float) -> dict[str, Any]:
    barrier = threading.Barrier(2, timeout=wait_s)

    def meet(ctx: JobContext) -> dict[str, Any]:
        barrier.wait()  # BrokenBarrierError (the job fails) unless the other job runs too
        return {"met": ctx.kind}

    return {"export": meet}


def test_two_tenants_jobs_run_side_by_side_on_two_threads(runtime_of: Any) -> None:
    runtime = runtime_of(2)
    ids = [_export(runtime), _export(runtime)]
    runtime.start_worker(handlers=_meeting(30.0))

    assert _ends(runtime, ids) == {job: ("completed", {"met": "export"}) for job in ids}


def test_on_one_thread_the_same_jobs_run_one_after_the_other(runtime_of: Any) -> None:
    runtime = runtime_of(1)
    ids = [_export(runtime), _export(runtime)]
    runtime.start_worker(handlers=_meeting(1.0))

    assert [state for state, _ in _ends(runtime, ids).values()] == ["failed", "failed"]
