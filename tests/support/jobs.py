"""Helpers for tests of the job queue on a database shared by a module's tests."""

from __future__ import annotations

from sqlalchemy import update

from control_plane.db.models import Job
from control_plane.runtime import Runtime


def close_runnable_jobs(runtime: Runtime) -> None:
    """Mark every queued or running job failed, so a test sees only the jobs it queues."""
    with runtime.sessions() as session:
        session.execute(update(Job).where(Job.state.in_(("queued", "running")))
                        .values(state="failed", lease_owner=None, lease_expires_at=None))
        session.commit()
