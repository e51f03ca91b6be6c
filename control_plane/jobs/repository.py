from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from ..db.models import Job


def get(session: Session, tenant_id: uuid.UUID, job_id: uuid.UUID) -> Job | None:
    return session.scalar(
        select(Job).execution_options(populate_existing=True)
        .where(Job.id == job_id, Job.tenant_id == tenant_id)
    )


def active_for_subject(session: Session, tenant_id: uuid.UUID, kind: str,
                       subject: str) -> Job | None:
    return session.scalar(
        select(Job).where(Job.tenant_id == tenant_id, Job.kind == kind, Job.subject == subject,
                          Job.state.in_(("queued", "running")))
        .order_by(Job.created_at).limit(1)
    )


def for_subject(session: Session, tenant_id: uuid.UUID, kind: str,
                subject: str) -> list[Job]:
    return list(session.scalars(
        select(Job).where(Job.tenant_id == tenant_id, Job.kind == kind, Job.subject == subject)
    ))


def next_claimable(session: Session, now: datetime) -> Job | None:
    """The oldest job that is queued, or running under a lease that has expired.

    On PostgreSQL the row is locked with SKIP LOCKED, so any number of workers can claim
    side by side without waiting on each other; SQLite has one writer at a time anyway
    (the caller holds the write lock), so a plain select is enough there.
    """
    query = (
        select(Job).execution_options(populate_existing=True)
        .where(or_(Job.state == "queued",
                   and_(Job.state == "running", Job.lease_expires_at < now)))
        .order_by(Job.created_at).limit(1)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return session.scalar(query)


def renew(session: Session, job_id: uuid.UUID, owner: str, expires: datetime,
          now: datetime) -> bool:
    """Extend the lease if ``owner`` still holds it; False means it was taken over."""
    result = session.execute(
        update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.state == "running")
        .values(lease_expires_at=expires, updated_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
