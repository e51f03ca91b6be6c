"""SQL of legal holds; every query takes the tenant and filters by it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, select, true
from sqlalchemy.orm import Session

from ..db.models import LegalHold, MemoryEvent, MemoryPointer


def active(session: Session, tenant_id: uuid.UUID) -> Sequence[LegalHold]:
    return session.scalars(select(LegalHold).where(
        LegalHold.tenant_id == tenant_id, LegalHold.lifted_at.is_(None))
        .order_by(LegalHold.created_at, LegalHold.id)).all()


def all_of(session: Session, tenant_id: uuid.UUID, limit: int) -> Sequence[LegalHold]:
    return session.scalars(select(LegalHold).where(LegalHold.tenant_id == tenant_id)
                           .order_by(LegalHold.created_at, LegalHold.id).limit(limit)).all()


def get(session: Session, tenant_id: uuid.UUID, hold_id: str, *,
        for_update: bool = False) -> LegalHold | None:
    query = select(LegalHold).where(LegalHold.tenant_id == tenant_id, LegalHold.id == hold_id)
    if for_update:
        query = query.with_for_update()
    return session.scalar(query.execution_options(populate_existing=True))


def _covers(holds: Sequence[LegalHold], scope_col: Any, ref_col: Any,
            subject_col: Any) -> ColumnElement[bool]:
    terms: list[ColumnElement[bool]] = []
    for hold in holds:
        if hold.target == "tenant":
            return true()
        if hold.target == "subject":
            # IS NOT NULL first: a NULL subject must make the term false, not NULL, or
            # NOT(held) would drop every memory without a subject
            terms.append(or_(and_(subject_col.is_not(None), subject_col == hold.user_id),
                             and_(scope_col == "user", ref_col == hold.user_id)))
        else:
            terms.append(and_(scope_col == hold.scope_type, ref_col == hold.scope_ref))
    return or_(*terms) if terms else false()


def pointers_held(holds: Sequence[LegalHold]) -> ColumnElement[bool]:
    """The SQL condition for pointers (memories and entries) some of ``holds`` covers."""
    return _covers(holds, MemoryPointer.scope_type, MemoryPointer.scope_ref,
                   MemoryPointer.subject_user_id)


def events_held(holds: Sequence[LegalHold]) -> ColumnElement[bool]:
    """The SQL condition for raw events some of ``holds`` covers."""
    return _covers(holds, MemoryEvent.scope_type, MemoryEvent.scope_ref,
                   MemoryEvent.subject_user_id)
