from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    cast,
    delete,
    exists,
    func,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session, configure_mappers
from sqlalchemy.orm.instrumentation import manager_of_class

from ..addresses import MemoryAddress
from ..db.models import VECTOR_SUFFIX, GcCandidate, MemoryPointer
from ..identity import EVERYTHING, Access
from .schemas import PointerOrder
from .search_objects import SEGMENT_SUFFIX, named_segment_paths


def _by_address(tenant_id: uuid.UUID, address: MemoryAddress):  # type: ignore[no-untyped-def]
    # populate_existing: the session keeps objects across commits (expire_on_commit=False),
    # so every read must refresh them, or a compare-and-swap would compare stale versions.
    return select(MemoryPointer).execution_options(populate_existing=True).where(
        MemoryPointer.tenant_id == tenant_id,
        MemoryPointer.scope_type == address.scope,
        MemoryPointer.scope_ref == address.scope_ref,
        MemoryPointer.key == address.key,
    )


def get(session: Session, tenant_id: uuid.UUID, address: MemoryAddress) -> MemoryPointer | None:
    return session.scalar(_by_address(tenant_id, address))


def lock(session: Session, tenant_id: uuid.UUID, address: MemoryAddress) -> MemoryPointer | None:
    return session.scalar(_by_address(tenant_id, address).with_for_update())


def get_by_id(session: Session, tenant_id: uuid.UUID, pointer_id: uuid.UUID, *,
              for_update: bool = False) -> MemoryPointer | None:
    """A pointer by id within the tenant (keyless pointers such as entries have no address)."""
    query = select(MemoryPointer).execution_options(populate_existing=True).where(
        MemoryPointer.tenant_id == tenant_id, MemoryPointer.id == pointer_id)
    return session.scalar(query.with_for_update() if for_update else query)


def has_tag(session: Session, tag: str) -> ColumnElement[bool]:
    """SQL: the pointer's JSON ``tags`` hold ``tag`` (PostgreSQL: JSONB containment; SQLite:
    its ``json_each``). Tags are metadata, so this filters in the database."""
    if session.get_bind().dialect.name == "postgresql":
        return cast(MemoryPointer.tags, JSONB).contains([tag])
    each = func.json_each(MemoryPointer.tags).table_valued("value")
    return exists(select(literal_column("1")).select_from(each).where(each.c.value == tag))


def mark_corrupt(session: Session, pointer_id: uuid.UUID, storage_path: str,
                 now: datetime) -> bool:
    """Mark corrupt only if the pointer still names the object that failed."""
    result = session.execute(
        update(MemoryPointer)
        .where(MemoryPointer.id == pointer_id, MemoryPointer.storage_path == storage_path,
               MemoryPointer.sync_status.in_(("synced", "corrupt")))
        .values(sync_status="corrupt", updated_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def mark_synced(session: Session, pointer_id: uuid.UUID, storage_path: str,
                now: datetime) -> None:
    session.execute(
        update(MemoryPointer)
        .where(MemoryPointer.id == pointer_id, MemoryPointer.storage_path == storage_path,
               MemoryPointer.sync_status == "corrupt")
        .values(sync_status="synced", updated_at=now)
    )


def lock_scope(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str,
               limit: int) -> Sequence[MemoryPointer]:
    return session.scalars(
        select(MemoryPointer)
        .where(MemoryPointer.tenant_id == tenant_id, MemoryPointer.scope_type == scope,
               MemoryPointer.scope_ref == scope_ref, MemoryPointer.key.is_not(None),
               MemoryPointer.sync_status != "pending_delete")
        .order_by(MemoryPointer.id).limit(limit).with_for_update()
    ).all()


def pending_delete_in_scope(session: Session, tenant_id: uuid.UUID, scope: str,
                            scope_ref: str, limit: int) -> Sequence[MemoryPointer]:
    return session.scalars(
        select(MemoryPointer)
        .where(MemoryPointer.tenant_id == tenant_id, MemoryPointer.scope_type == scope,
               MemoryPointer.scope_ref == scope_ref, MemoryPointer.key.is_not(None),
               MemoryPointer.sync_status == "pending_delete")
        .order_by(MemoryPointer.id).limit(limit)
    ).all()


def delete_pending(session: Session, pointer_ids: Sequence[uuid.UUID]) -> int:
    """Remove rows whose objects are gone; a row rewritten meanwhile is left alone."""
    result = session.execute(
        delete(MemoryPointer)
        .where(MemoryPointer.id.in_(pointer_ids), MemoryPointer.sync_status == "pending_delete")
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


ORDERS = tuple(order.value for order in PointerOrder)  # how a listing may be ordered


@dataclass(frozen=True)
class After:
    """Where the previous page ended: its last pointer's id, and its key when listing by
    key or its last write when listing by that."""

    id: uuid.UUID
    key: str | None = None
    updated: datetime | None = None


# What a read answers 404 for while it lasts (``read.check_live``): a write or delete in flight.
UNREADABLE = ("pending_delete", "pending_write")


def list_page(session: Session, tenant_id: uuid.UUID, *, scope: str | None,
              scope_ref: str | None, user_id: str | None, memory_type: str | None,
              sync_status: str | None, after: After | None,
              limit: int, access: Access = EVERYTHING,
              now: datetime | None = None, tag: str | None = None,
              key_prefix: str | None = None, order: str = "created",
              readable: bool = False) -> Sequence[MemoryPointer]:
    """Keyset paging on the pointer's id, which a row keeps for life (or on its key and id):
    a row that exists throughout a walk is on exactly one page whatever is inserted or
    deleted meanwhile. With ``now``, memories whose ``ttl_days`` ran out by then are left
    out, as reads refuse them; with ``readable``, all but the memories by key a read would
    serve (``READABLE``). The pointers are in no session (``pointer_of``): for reading.
    (PostgreSQL lists through ``listing``, in one statement.)"""
    query = select(*MemoryPointer.__table__.c).where(MemoryPointer.tenant_id == tenant_id)
    if now is not None:
        query = query.where(or_(MemoryPointer.expires_at.is_(None),
                                MemoryPointer.expires_at > now))
        from .visibility import visible_pointers  # policies' due rows: hidden

        kept = visible_pointers(session, tenant_id, now)
        if kept is not None:
            query = query.where(kept)
    visible = access.where(MemoryPointer.scope_type, MemoryPointer.scope_ref,
                           MemoryPointer.subject_user_id)
    if visible is not None:
        query = query.where(visible)
    if scope is not None:
        query = query.where(MemoryPointer.scope_type == scope)
    if scope_ref is not None:
        query = query.where(MemoryPointer.scope_ref == scope_ref)
    if user_id is not None:
        query = query.where(MemoryPointer.subject_user_id == user_id)
    if memory_type is not None:
        query = query.where(MemoryPointer.memory_type == memory_type)
    if sync_status is not None:
        query = query.where(MemoryPointer.sync_status == sync_status)
    if tag is not None:
        query = query.where(has_tag(session, tag))
    if key_prefix is not None:
        query = query.where(MemoryPointer.key.startswith(key_prefix, autoescape=True))
    if readable:
        query = query.where(MemoryPointer.key.is_not(None),
                            MemoryPointer.sync_status.not_in(UNREADABLE))
    pid = MemoryPointer.id
    if order == "created":
        if after is not None:
            query = query.where(pid > after.id)
        query = query.order_by(pid)
    elif order == "updated_desc":
        written = MemoryPointer.updated_at
        if after is not None:
            query = query.where(or_(written < after.updated,
                                    and_(written == after.updated, pid < after.id)))
        query = query.order_by(written.desc(), pid.desc())
    else:
        key = (MemoryPointer.key.collate("C")
               if session.get_bind().dialect.name == "postgresql" else MemoryPointer.key)
        query = query.where(MemoryPointer.key.is_not(None))
        if after is not None:
            if order == "key":
                query = query.where(or_(key > after.key, and_(key == after.key, pid > after.id)))
            else:
                query = query.where(or_(key < after.key, and_(key == after.key, pid < after.id)))
        query = query.order_by(key, pid) if order == "key" else query.order_by(key.desc(),
                                                                               pid.desc())
    # Rows, not ORM objects: a page is read to be answered, and the ORM's loading and
    # identity map cost more than the statement (pointer_of).
    return [pointer_of(row) for row in session.execute(query.limit(limit))]


def stale(session: Session, status: str, before: datetime, limit: int,
          tenant_id: uuid.UUID | None = None) -> Sequence[MemoryPointer]:
    query = select(MemoryPointer).where(MemoryPointer.sync_status == status,
                                        MemoryPointer.updated_at < before)
    if tenant_id is not None:
        query = query.where(MemoryPointer.tenant_id == tenant_id)
    return session.scalars(query.order_by(MemoryPointer.updated_at).limit(limit)).all()


def named_paths(session: Session, config_id: uuid.UUID, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` some pointer still names (a search vector ``<content>.vec`` counts
    as named while its content is; search segments are named by their rows)."""
    bases = {p[:-len(VECTOR_SUFFIX)] if p.endswith(VECTOR_SUFFIX) else p for p in paths}
    rows = set(session.scalars(
        select(MemoryPointer.storage_path)
        .where(MemoryPointer.storage_config_id == config_id,
               MemoryPointer.storage_path.in_(bases))
    ).all())
    named = {p for p in paths
             if (p[:-len(VECTOR_SUFFIX)] if p.endswith(VECTOR_SUFFIX) else p) in rows}
    if any(p.endswith(SEGMENT_SUFFIX) for p in paths):
        named |= named_segment_paths(session, config_id, [p for p in paths
                                                          if p.endswith(SEGMENT_SUFFIX)])
    return named


def gc_marked(session: Session, config_id: uuid.UUID, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` are already orphan-GC candidates."""
    rows = session.scalars(
        select(GcCandidate.path)
        .where(GcCandidate.storage_config_id == config_id, GcCandidate.path.in_(paths))
    ).all()
    return set(rows)


def gc_mark(session: Session, tenant_id: uuid.UUID, config_id: uuid.UUID, paths: Sequence[str],
            now: datetime) -> None:
    session.add_all(GcCandidate(storage_config_id=config_id, path=p, tenant_id=tenant_id,
                                marked_at=now) for p in paths)


def gc_due(session: Session, config_id: uuid.UUID, before: datetime, after_path: str,
           limit: int) -> Sequence[str]:
    """Candidates marked before ``before``, in path order after ``after_path``."""
    return session.scalars(
        select(GcCandidate.path)
        .where(GcCandidate.storage_config_id == config_id, GcCandidate.marked_at <= before,
               GcCandidate.path > after_path, GcCandidate.swept_at.is_(None))
        .order_by(GcCandidate.path).limit(limit)
    ).all()


def gc_waiting(session: Session, config_id: uuid.UUID, before: datetime) -> int:
    return session.scalar(
        select(func.count()).select_from(GcCandidate)
        .where(GcCandidate.storage_config_id == config_id, GcCandidate.marked_at > before,
               GcCandidate.swept_at.is_(None))
    ) or 0


def gc_unmark(session: Session, config_id: uuid.UUID, paths: Sequence[str]) -> None:
    session.execute(delete(GcCandidate).where(GcCandidate.storage_config_id == config_id,
                                              GcCandidate.path.in_(paths)))


_COLUMNS = tuple(c.key for c in MemoryPointer.__table__.c)
_new_pointer = manager_of_class(MemoryPointer).new_instance
_mappers_ready = False


def _blank_pointer() -> MemoryPointer:
    global _mappers_ready
    if not _mappers_ready:  # attribute access needs them, as the constructor would have
        configure_mappers()
        _mappers_ready = True
    pointer: MemoryPointer = _new_pointer()
    return pointer


# Where each column sits in a row of the given field names: a statement's rows all share
# one tuple of names, so each row is read by position (attribute access by name on a
# SQLAlchemy row costs ~1 µs a column).
_PICKS: dict[tuple[str, ...], Any] = {}


def _pick(fields: tuple[str, ...]) -> Any:
    pick = _PICKS.get(fields)
    if pick is None:
        if len(_PICKS) >= 1_000:
            _PICKS.clear()
        pick = _PICKS[fields] = itemgetter(*(fields.index(name) for name in _COLUMNS))
    return pick


def pointer_of(row: Any) -> MemoryPointer:
    """A MemoryPointer, not in any session, from a row holding its columns (by name, in any
    order, among others): what a lookup answers, for reading. Its values are set as loaded
    values are, without the constructor's attribute events (60 µs of each batch item's CPU,
    ~3 µs this way)."""
    values = dict(zip(_COLUMNS, _pick(row._fields)(row), strict=True))
    for name in ("created_at", "updated_at", "expires_at"):  # UTC, as UTCDateTime gives it
        if values[name] is not None:
            values[name] = _utc(values[name])
    pointer = _blank_pointer()
    pointer.__dict__.update(values)
    return pointer


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
