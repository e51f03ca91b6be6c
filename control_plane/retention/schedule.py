"""Queueing retention runs: one a caller asks for (``POST /v1/retention/run``) and each
tenant's daily one (``MEMPLANE_RETENTION_SCHEDULE``); the run itself is ``retention.sweep``."""

from __future__ import annotations

from datetime import date

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ..audit import service as audit
from ..audit.service import audited
from ..db.engine import begin_write
from ..db.models import AgentSettings, Job, MemoryPointer, RetentionPolicy
from ..identity import Actor
from ..jobs.daily import queue_for
from ..jobs.service import enqueue
from .schemas import RetentionRunIn

KIND = "retention"


def start_run(session: Session, actor: Actor, body: RetentionRunIn) -> Job:
    """Queue a retention run of the caller's tenant now (``POST /v1/retention/run``)."""
    with audited(session, actor, "retention_run", detail="retention run requested"):
        session.rollback()
        begin_write(session)
        job = enqueue(session, actor.tenant_id, KIND, subject=None,
                      params={"dry_run": body.dry_run})
        audit.record(session, actor, "retention_run",
                     detail=f"{'dry run' if body.dry_run else 'retention'} job {job.id} queued")
        session.commit()
        return job


def run_key(day: date) -> str:
    """The unique job key of a tenant's scheduled retention run on ``day`` (UTC)."""
    return f"retention:{day.isoformat()}"


def queue_daily_runs(sessions: sessionmaker[Session], day: date, owner: str) -> int:
    """Queue ``day``'s run for every tenant with a policy or a memory with ``ttl_days``;
    the unique job key makes it one run per tenant and day however many workers tick."""
    with sessions() as session:
        tenants = sorted(set(session.scalars(select(RetentionPolicy.tenant_id).distinct()))
                         | set(session.scalars(select(MemoryPointer.tenant_id).distinct()
                                               .where(MemoryPointer.expires_at.is_not(None))))
                         | set(session.scalars(
                             select(AgentSettings.tenant_id).distinct().where(
                                 AgentSettings.user_memory_retention_days.is_not(None)))))
        session.rollback()
        return queue_for(session, tenants, KIND, run_key(day), day, owner, "retention_run",
                         "retention")
