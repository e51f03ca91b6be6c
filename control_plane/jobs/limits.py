"""How many jobs one tenant may have: queued or running per kind (the quota, checked when a job
is created) and running at once (the concurrency, kept by the claim query).

The numbers come from the settings (``MEMPLANE_JOB_TENANT_QUOTA``,
``MEMPLANE_JOB_TENANT_CONCURRENCY``); the runtime hands them to every session it makes
(``configure``), so each place that queues a job (``service.enqueue``) is held to them without
carrying the settings around. A session made elsewhere gets the settings' defaults.

The quota is counted under a lock on the tenant's row (``FOR NO KEY UPDATE``: inserts that
reference the tenant are not held up), so concurrent requests on PostgreSQL queue there and
the second sees the first's job; SQLite's write transaction serialises them anyway.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from ..db.models import Job, Tenant
from ..errors import DomainError
from ..settings import Settings

_INFO_KEY = "memplane.job_limits"
# What a refused caller is told to wait before it asks again.
RETRY_AFTER_SECONDS = 30


class TooManyJobs(DomainError):
    status_code = 429
    code = "too_many_jobs"


@dataclass(frozen=True)
class JobLimits:
    quota: int
    concurrency: int

    @classmethod
    def of_settings(cls, settings: Settings) -> JobLimits:
        return cls(settings.job_tenant_quota, settings.job_tenant_concurrency)


def _defaults() -> JobLimits:
    fields = Settings.model_fields
    return JobLimits(int(fields["job_tenant_quota"].default),
                     int(fields["job_tenant_concurrency"].default))


def configure(sessions: sessionmaker[Session], settings: Settings) -> None:
    """Every session ``sessions`` makes from now on carries the settings' job limits."""
    info: dict[str, Any] = dict(sessions.kw.get("info") or {})
    info[_INFO_KEY] = JobLimits.of_settings(settings)
    sessions.configure(info=info)


def of_session(session: Session) -> JobLimits:
    limits = session.info.get(_INFO_KEY)
    return limits if isinstance(limits, JobLimits) else _defaults()


def queued_or_running(session: Session, tenant_id: uuid.UUID, kind: str) -> int:
    return int(session.scalar(
        select(func.count()).select_from(Job)
        .where(Job.tenant_id == tenant_id, Job.kind == kind,
               Job.state.in_(("queued", "running")))) or 0)


def ensure_room(session: Session, tenant_id: uuid.UUID, kind: str) -> None:
    """In the open write transaction: raise TooManyJobs (429) when the tenant already has its
    quota of ``kind`` jobs queued or running. The tenant's row stays locked until the caller
    commits, so two requests never both take the last place."""
    session.execute(select(Tenant.id).where(Tenant.id == tenant_id)
                    .with_for_update(key_share=True))
    quota = of_session(session).quota
    if queued_or_running(session, tenant_id, kind) >= quota:
        raise TooManyJobs(
            f"this tenant already has {quota} {kind} jobs queued or running, the most it may "
            f"have at once (MEMPLANE_JOB_TENANT_QUOTA); wait for one to finish "
            f"(GET /v1/jobs/{{id}}) and send the request again",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)}, kind=kind, limit=quota)
