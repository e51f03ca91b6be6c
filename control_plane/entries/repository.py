from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.orm import Session

from ..db.base import utcnow
from ..db.models import EntryTerm, MemoryPointer
from ..memories.hotpath import as_table
from ..memories.repository import has_tag
from ..retention.repository import visible_pointers
from ..tenants.access import EVERYTHING, Access

ENTRY = "entry"
TERMS = as_table(EntryTerm.__table__)


def add_terms(session: Session, tenant_id: uuid.UUID, pointer_id: uuid.UUID,
              terms: Sequence[str]) -> None:
    if terms:  # a Core executemany: the ORM's bulk path costs more than the rows
        session.connection().execute(insert(TERMS), [
            {"pointer_id": pointer_id, "term": t, "tenant_id": tenant_id} for t in terms])


def replace_terms(session: Session, tenant_id: uuid.UUID, pointer_id: uuid.UUID,
                  terms: Sequence[str]) -> None:
    session.execute(delete(EntryTerm).where(EntryTerm.tenant_id == tenant_id,
                                            EntryTerm.pointer_id == pointer_id))
    add_terms(session, tenant_id, pointer_id, terms)


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
    visible = access.where(MemoryPointer.scope_type, MemoryPointer.scope_ref)
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
