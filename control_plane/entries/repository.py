from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from sqlalchemy import Table, delete, func, or_, select
from sqlalchemy.orm import Session

from ..db.base import utcnow
from ..db.models import AccessLog, EntryTerm, MemoryPointer, SubjectKey
from ..identity import EVERYTHING, Access
from ..memories.hotpath import as_table
from ..memories.repository import has_tag
from ..memories.visibility import visible_pointers

ENTRY = "entry"
TERMS = as_table(EntryTerm.__table__)
POINTERS = as_table(MemoryPointer.__table__)
AUDIT = as_table(AccessLog.__table__)
# Bound parameters per multi-row INSERT: under SQLite's limit (32,766) and PostgreSQL's
# (65,535) with room to spare.
MAX_PARAMS = 30_000


def insert_rows(session: Session, table: Table, rows: Sequence[Mapping[str, object]]) -> None:
    """Insert ``rows`` (dicts with the same keys, in the same order) as few multi-row INSERT
    statements, written out here with the columns' own bind processors.

    Not an executemany: the SQLite driver gives up and takes back the GIL once per row of an
    executemany, and each take-back can wait a whole switch interval while another thread
    runs Python — inside a write transaction, which holds the database's one writer slot.
    Nor SQLAlchemy's multi-row ``values()``: compiling it for every call costs more than the
    rows. One statement steps once."""
    if not rows:
        return
    connection = session.connection()
    dialect = connection.dialect
    names = list(rows[0])
    columns = [table.c[name] for name in names]
    processors = [column.type._cached_bind_processor(dialect) for column in columns]
    mark = "?" if dialect.paramstyle == "qmark" else "%s"
    row_marks = "(" + ", ".join([mark] * len(names)) + ")"
    head = (f"INSERT INTO {dialect.identifier_preparer.format_table(table)} ("
            + ", ".join(dialect.identifier_preparer.format_column(c) for c in columns)
            + ") VALUES ")
    per = max(1, MAX_PARAMS // len(names))
    for start in range(0, len(rows), per):
        chunk = rows[start:start + per]
        params: list[object] = []
        for row in chunk:
            for name, process in zip(names, processors, strict=True):
                value = row[name]
                params.append(process(value) if process is not None else value)
        connection.exec_driver_sql(head + ", ".join([row_marks] * len(chunk)), tuple(params))


def add_terms(session: Session, tenant_id: uuid.UUID, pointer_id: uuid.UUID,
              terms: Sequence[str]) -> None:
    insert_rows(session, TERMS, [
        {"pointer_id": pointer_id, "term": t, "tenant_id": tenant_id} for t in terms])


def replace_terms(session: Session, tenant_id: uuid.UUID, pointer_id: uuid.UUID,
                  terms: Sequence[str]) -> None:
    session.execute(delete(EntryTerm).where(EntryTerm.tenant_id == tenant_id,
                                            EntryTerm.pointer_id == pointer_id))
    add_terms(session, tenant_id, pointer_id, terms)


def live_keys(session: Session, tenant_id: uuid.UUID, subjects: set[tuple[str, str]],
              ) -> list[tuple[uuid.UUID, tuple[str, str], bytes, uuid.UUID]]:
    """The live key (id, subject, wrapped key, KEK version) of each of ``subjects`` that has
    one, in one statement."""
    if not subjects:
        return []
    rows = session.execute(
        select(SubjectKey.id, SubjectKey.scope_type, SubjectKey.scope_ref,
               SubjectKey.wrapped_key, SubjectKey.kek_version_id)
        .where(SubjectKey.tenant_id == tenant_id, SubjectKey.destroyed_at.is_(None),
               SubjectKey.scope_type.in_({s[0] for s in subjects}),
               SubjectKey.scope_ref.in_({s[1] for s in subjects})))
    return [(key_id, (scope, ref), bytes(wrapped), kek)
            for key_id, scope, ref, wrapped, kek in rows
            if (scope, ref) in subjects and wrapped is not None]


def any_key_destroyed(session: Session, key_ids: Sequence[uuid.UUID]) -> bool:
    """Whether any of the keys was destroyed since it was looked up. Their rows are share
    locked (PostgreSQL), as a single write's check does: a destruction not committed yet
    waits for this transaction, whose pointers the erasure's verification then sees."""
    if not key_ids:
        return False
    destroyed = session.execute(
        select(SubjectKey.destroyed_at).where(SubjectKey.id.in_(key_ids))
        .with_for_update(read=True)).scalars().all()
    return any(d is not None for d in destroyed)


def list_page(session: Session, tenant_id: uuid.UUID, *, scope: str | None,
              scope_ref: str | None, tag: str | None, terms: Sequence[str] | None,
              min_importance: int | None, after: uuid.UUID | None, limit: int,
              access: Access = EVERYTHING) -> Sequence[MemoryPointer]:
    """Keyset paging on the id over the tenant's live entries. ``terms``: entries holding
    every one (the blind index answers through its (tenant_id, term) index)."""
    query = select(MemoryPointer).where(
        MemoryPointer.tenant_id == tenant_id, MemoryPointer.key.is_(None),
        MemoryPointer.memory_type == ENTRY,
        MemoryPointer.sync_status.in_(("synced", "corrupt")),
        or_(MemoryPointer.expires_at.is_(None), MemoryPointer.expires_at > utcnow()))
    kept = visible_pointers(session, tenant_id, utcnow())  # past a policy: hidden until the run
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
    if min_importance is not None:
        query = query.where(MemoryPointer.importance >= min_importance)
    if tag is not None:
        query = query.where(has_tag(session, tag))
    if terms:
        holding = (select(EntryTerm.pointer_id)
                   .where(EntryTerm.tenant_id == tenant_id, EntryTerm.term.in_(terms))
                   .group_by(EntryTerm.pointer_id)
                   .having(func.count() == len(terms)))
        query = query.where(MemoryPointer.id.in_(holding))
    if after is not None:
        query = query.where(MemoryPointer.id > after)
    return session.scalars(query.order_by(MemoryPointer.id).limit(limit)).all()


def terms_of(session: Session, pointer_id: uuid.UUID) -> list[str]:
    return list(session.scalars(select(EntryTerm.term).where(EntryTerm.pointer_id == pointer_id)
                                .order_by(EntryTerm.term)))
