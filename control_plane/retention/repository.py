"""SQL of retention: a tenant's policy by id or by what it governs, and the rows a run
deletes. Which rows a policy governs, and which it hides until the run, is
``memories.visibility`` (lists and searches read it too)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, not_, select
from sqlalchemy.orm import Session

from ..db.models import MemoryEvent, MemoryPointer, RetentionPolicy

LIVE = ("synced", "corrupt", "pending_delete")


def get(session: Session, tenant_id: uuid.UUID, policy_id: uuid.UUID, *,
        scope: str | None = None, memory_type: str | None = None) -> RetentionPolicy | None:
    return session.scalar(select(RetentionPolicy).where(
        RetentionPolicy.tenant_id == tenant_id, RetentionPolicy.id == policy_id))


def find(session: Session, tenant_id: uuid.UUID, scope: str,
         memory_type: str) -> RetentionPolicy | None:
    return session.scalar(select(RetentionPolicy).where(
        RetentionPolicy.tenant_id == tenant_id, RetentionPolicy.scope_type == scope,
        RetentionPolicy.memory_type == memory_type).with_for_update()
        .execution_options(populate_existing=True))  # read again under the lock


def due_pointers(session: Session, tenant_id: uuid.UUID, governed: ColumnElement[bool],
                 before: datetime, held: ColumnElement[bool], limit: int,
                 ttl: bool = False) -> Sequence[MemoryPointer]:
    age = (and_(MemoryPointer.expires_at.is_not(None), MemoryPointer.expires_at <= before)
           if ttl else MemoryPointer.updated_at < before)
    return session.scalars(select(MemoryPointer).where(
        MemoryPointer.tenant_id == tenant_id, governed, age,
        MemoryPointer.sync_status.in_(LIVE), not_(held))
        .order_by(MemoryPointer.id).limit(limit)).all()


def due_events(session: Session, tenant_id: uuid.UUID, governed: ColumnElement[bool],
               before: datetime, held: ColumnElement[bool],
               limit: int) -> Sequence[MemoryEvent]:
    return session.scalars(select(MemoryEvent).where(
        MemoryEvent.tenant_id == tenant_id, governed, MemoryEvent.occurred_at < before,
        MemoryEvent.sync_status.in_(LIVE), not_(held))
        .order_by(MemoryEvent.id).limit(limit)).all()
