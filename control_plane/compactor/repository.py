"""The compactor's SQL: which buckets are due, their events, marking them, provenance."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Select, bindparam, case, func, insert, select, update
from sqlalchemy.orm import Session

from ..db.models import (
    Compaction,
    CompactionEvent,
    CompactorSettings,
    MemoryEvent,
)
from ..entries.repository import insert_rows
from ..memories.hotpath import as_table

EVENTS = as_table(MemoryEvent.__table__)
COMPACTIONS = as_table(Compaction.__table__)
COMPACTION_EVENTS = as_table(CompactionEvent.__table__)


@dataclass(frozen=True)
class Bucket:
    """One (scope, scope ref) due for compaction, with ``events`` uncompressed events: once
    the bucket qualifies, all of them are compacted, not only those past the cutoff."""

    scope: str
    scope_ref: str
    events: int


def due_buckets(session: Session, tenant_id: uuid.UUID, *, cutoff: datetime, min_events: int,
                scope: str | None = None, scope_ref: str | None = None) -> list[Bucket]:
    """Every (scope, scope ref) of the tenant holding at least ``min_events`` uncompressed
    events that occurred before ``cutoff``, with the count of *all* its uncompressed events
    (the seed's step 1: a bucket that qualifies is compacted whole) — one grouped query over
    the partial index ``ix_memory_events_uncompressed`` (tenant, scope, scope ref, occurred_at WHERE
    compressed_at IS NULL): only uncompressed rows are in it, and it holds every column the
    query reads, so PostgreSQL answers it with an index-only scan."""
    query = due_buckets_query(tenant_id, cutoff=cutoff, min_events=min_events, scope=scope,
                              scope_ref=scope_ref)
    return [Bucket(s, r, int(n)) for s, r, n in session.execute(query)]


def due_buckets_query(tenant_id: uuid.UUID, *, cutoff: datetime, min_events: int,
                      scope: str | None = None,
                      scope_ref: str | None = None) -> Select[str, str, int]:
    old = func.sum(case((MemoryEvent.occurred_at < cutoff, 1), else_=0))
    query = (
        select(MemoryEvent.scope_type, MemoryEvent.scope_ref, func.count())
        .where(MemoryEvent.tenant_id == tenant_id, MemoryEvent.compressed_at.is_(None))
        .group_by(MemoryEvent.scope_type, MemoryEvent.scope_ref)
        .having(old >= min_events)
        .order_by(MemoryEvent.scope_type, MemoryEvent.scope_ref)
    )
    if scope is not None:
        query = query.where(MemoryEvent.scope_type == scope)
    if scope_ref is not None:
        query = query.where(MemoryEvent.scope_ref == scope_ref)
    return query


def bucket_events(session: Session, tenant_id: uuid.UUID, bucket: Bucket, *,
                  limit: int, cutoff: datetime | None = None) -> list[MemoryEvent]:
    """The bucket's oldest uncompressed, settled events (all of them: a due bucket is
    compacted whole; before ``cutoff`` only when one is given), in the order they are
    summarised: (occurred_at, id)."""
    query = (
        select(MemoryEvent)
        .where(MemoryEvent.tenant_id == tenant_id, MemoryEvent.scope_type == bucket.scope,
               MemoryEvent.scope_ref == bucket.scope_ref, MemoryEvent.compressed_at.is_(None),
               MemoryEvent.sync_status == "synced")
        .order_by(MemoryEvent.occurred_at, MemoryEvent.id).limit(limit))
    if cutoff is not None:
        query = query.where(MemoryEvent.occurred_at < cutoff)
    return list(session.scalars(query))


# Core, not ORM (no session objects to synchronise, so no ORM bulk-update work), and built
# once: building the statement for each entry cost more than running it.
_MARK = (
    update(EVENTS)
    .where(EVENTS.c.tenant_id == bindparam("m_tenant"),
           EVENTS.c.scope_type == bindparam("m_scope"),
           EVENTS.c.scope_ref == bindparam("m_scope_ref"),
           EVENTS.c.occurred_at >= bindparam("m_since"),
           EVENTS.c.occurred_at <= bindparam("m_until"),
           EVENTS.c.id.in_(bindparam("m_ids", expanding=True)),
           EVENTS.c.compressed_at.is_(None))
    .values(compressed_at=bindparam("m_now"))
)


class Dated(Protocol):
    """What marking needs of an event: a loaded row, or the compactor's light copy of one."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def occurred_at(self) -> datetime: ...


def mark_compressed(session: Session, tenant_id: uuid.UUID, bucket: Bucket,
                    events: Sequence[Dated], now: datetime) -> int:
    """Set ``compressed_at`` on those of ``events`` (all of ``bucket``) that have none yet;
    how many did.

    The statement names the bucket and the events' time range as well as their ids — always
    true of those events (an event's scope and time never change) —, so the database finds
    them by a short range of ``ix_memory_events_uncompressed``. With the ids alone SQLite
    chose that index by its tenant prefix and walked every uncompressed event of the tenant
    for each entry: a run's marking cost grew with the square of its events."""
    times = [event.occurred_at for event in events]
    result = session.execute(_MARK, {
        "m_tenant": tenant_id, "m_scope": bucket.scope, "m_scope_ref": bucket.scope_ref,
        "m_since": min(times), "m_until": max(times), "m_ids": [event.id for event in events],
        "m_now": now})
    return int(result.rowcount)  # type: ignore[attr-defined]


def add_provenance(session: Session, compaction: Compaction,
                   hashes: Sequence[tuple[uuid.UUID, str]]) -> None:
    """Core inserts (the row, then its events in one multi-row INSERT): nothing to flush."""
    session.execute(insert(COMPACTIONS).values(
        {column.key: getattr(compaction, column.key) for column in COMPACTIONS.columns}))
    insert_rows(session, COMPACTION_EVENTS, [
        {"compaction_id": compaction.id, "event_id": event_id, "event_sha256": digest}
        for event_id, digest in hashes])


def add_provenances(session: Session, compactions: Sequence[dict[str, object]],
                    hashes: Sequence[dict[str, object]]) -> None:
    """A group's provenance: its ``compactions`` rows and their events' (``compaction_id``,
    ``event_id``, ``event_sha256``) rows, one multi-row INSERT each."""
    insert_rows(session, COMPACTIONS, compactions)
    insert_rows(session, COMPACTION_EVENTS, hashes)


def active_tenants(session: Session) -> list[uuid.UUID]:
    """Tenants with uncompressed events (read from the partial index), less those that
    turned their compactor off."""
    disabled = select(CompactorSettings.tenant_id).where(CompactorSettings.enabled.is_(False))
    return list(session.scalars(
        select(MemoryEvent.tenant_id).distinct()
        .where(MemoryEvent.compressed_at.is_(None), MemoryEvent.tenant_id.not_in(disabled))
        .order_by(MemoryEvent.tenant_id)
    ))


def get_settings(session: Session, tenant_id: uuid.UUID) -> CompactorSettings | None:
    return session.get(CompactorSettings, tenant_id, populate_existing=True)


def compaction_of(session: Session, tenant_id: uuid.UUID,
                  entry_id: uuid.UUID) -> tuple[Compaction, list[CompactionEvent]] | None:
    compaction = session.scalar(select(Compaction).where(
        Compaction.id == entry_id, Compaction.tenant_id == tenant_id))
    if compaction is None:
        return None
    events = list(session.scalars(select(CompactionEvent).where(
        CompactionEvent.compaction_id == entry_id)))
    return compaction, events
