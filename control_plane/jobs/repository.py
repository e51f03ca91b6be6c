from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

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


def all_active_for_subject(session: Session, tenant_id: uuid.UUID, kind: str,
                           subject: str) -> list[Job]:
    return list(session.scalars(
        select(Job).where(Job.tenant_id == tenant_id, Job.kind == kind, Job.subject == subject,
                          Job.state.in_(("queued", "running")))
        .order_by(Job.created_at)
    ))


def for_subject(session: Session, tenant_id: uuid.UUID, kind: str,
                subject: str) -> list[Job]:
    return list(session.scalars(
        select(Job).where(Job.tenant_id == tenant_id, Job.kind == kind, Job.subject == subject)
    ))


def _live_running(tenant: Any, now: datetime) -> Any:
    """How many jobs of ``tenant`` run under a lease that has not expired (correlated)."""
    running = aliased(Job)
    return (select(func.count()).select_from(running)
            .where(running.tenant_id == tenant, running.state == "running",
                   running.lease_expires_at >= now)
            .correlate(Job).scalar_subquery())


def next_claimable(session: Session, now: datetime, *, per_tenant: int,
                   skip_tenants: Collection[uuid.UUID] = ()) -> Job | None:
    """The next job to run: queued, or running under a lease that has expired.

    A tenant with ``per_tenant`` jobs running under live leases gets none (its jobs wait;
    ``skip_tenants`` are passed over too). Tenants take turns: the job comes from the tenant
    with the fewest jobs running, then the one whose last claim is the oldest (a tenant never
    served first), and within that tenant the oldest job first. So one tenant's long queue
    delays another tenant's job by at most the one job being claimed: a tenant just served
    goes behind every tenant waiting.

    On PostgreSQL the row is locked with SKIP LOCKED, so any number of workers can claim
    side by side without waiting on each other (a locked job is passed over for the next in
    the same order); the claimer then checks the tenant's running count again under the
    tenant's claim lock (``room_to_run``). SQLite has one writer at a time anyway (the caller
    holds the write lock), so a plain select is enough there.
    """
    served = aliased(Job)
    last_claim = (select(func.max(served.claimed_at))
                  .where(served.tenant_id == Job.tenant_id)
                  .correlate(Job).scalar_subquery())
    live = _live_running(Job.tenant_id, now)
    query = (
        select(Job).execution_options(populate_existing=True)
        .where(or_(Job.state == "queued",
                   and_(Job.state == "running", Job.lease_expires_at < now)),
               live < per_tenant)
        .order_by(live.asc(), last_claim.asc().nulls_first(), Job.created_at, Job.id)
        .limit(1)
    )
    if skip_tenants:
        query = query.where(Job.tenant_id.not_in(list(skip_tenants)))
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=Job)
    return session.scalar(query)


# The first key of the PostgreSQL advisory locks a worker takes per tenant while claiming.
_CLAIM_LOCK = 0x6A6F6273  # "jobs"


def room_to_run(session: Session, tenant_id: uuid.UUID, now: datetime, per_tenant: int) -> bool:
    """In a claim's write transaction: whether the tenant still runs fewer than ``per_tenant``
    jobs under live leases. On PostgreSQL this first takes the tenant's claim lock (held to
    the end of the transaction), so two workers claiming for one tenant count one after the
    other: the second sees the first's claim once it has committed. SQLite's write lock
    already made ``next_claimable``'s own count current."""
    if session.get_bind().dialect.name != "postgresql":
        return True
    session.execute(select(func.pg_advisory_xact_lock(
        _CLAIM_LOCK, int.from_bytes(tenant_id.bytes[:4], "big", signed=True))))
    running = session.scalar(
        select(func.count()).select_from(Job)
        .where(Job.tenant_id == tenant_id, Job.state == "running", Job.lease_expires_at >= now))
    return int(running or 0) < per_tenant


def expired_exports(session: Session, now: datetime, limit: int) -> list[uuid.UUID]:
    """Export jobs whose archive is past its expiry and still in the bucket, oldest first."""
    return list(session.scalars(
        select(Job.id).where(Job.kind == "export", Job.expires_at <= now,
                             Job.state.in_(("completed", "failed")))
        .order_by(Job.expires_at).limit(limit)
    ))


def renew(session: Session, job_id: uuid.UUID, owner: str, expires: datetime,
          now: datetime) -> bool:
    """Extend the lease if ``owner`` still holds it; False means it was taken over."""
    result = session.execute(
        update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.state == "running")
        .values(lease_expires_at=expires, updated_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def insert_unique(session: Session, values: dict[str, Any]) -> uuid.UUID | None:
    """INSERT … ON CONFLICT (tenant_id, dedupe_key) DO NOTHING; the new id, or None when a
    job with that key is there already (committed or being inserted concurrently)."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = (dialect.insert(Job).values(**values)
                 .on_conflict_do_nothing(index_elements=["tenant_id", "dedupe_key"])
                 .returning(Job.id))
    inserted: uuid.UUID | None = session.scalar(statement)
    return inserted
