"""The rows the archive tier reads and marks. Every query filters by the tenant."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, exists, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from ..db.models import MemoryEvent, MemoryPointer, SubjectErasure


@dataclass(frozen=True)
class Item:
    """One object to move: a memory (pointer) or an event, as the row named it when read."""

    kind: str  # "pointer" | "event"
    id: uuid.UUID
    storage_config_id: uuid.UUID
    storage_path: str
    sync_status: str
    storage_class: str | None
    # A memory's vector object (control_plane/search), moved with it.
    embedding_path: str | None = None


def _not_being_erased(tenant_id: uuid.UUID, of_subject: ColumnElement[bool]
                      ) -> ColumnElement[bool]:
    """No erasure of the row's subject is running: its objects are about to go, and moving
    one by rewriting it could race the erasure's delete."""
    return ~exists().where(SubjectErasure.tenant_id == tenant_id, of_subject)


def pointers(session: Session, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]
             ) -> list[Item]:
    P = MemoryPointer
    rows = session.execute(
        select(P.id, P.storage_config_id, P.storage_path, P.sync_status, P.storage_class,
               P.embedding_storage_path)
        .where(P.tenant_id == tenant_id, P.id.in_(ids),
               _not_being_erased(tenant_id, or_(
                   SubjectErasure.user_id == P.subject_user_id,
                   and_(P.scope_type == "user", SubjectErasure.user_id == P.scope_ref))))
        .order_by(P.id)).all()
    return [Item("pointer", r.id, r.storage_config_id, r.storage_path, r.sync_status,
                 r.storage_class, r.embedding_storage_path) for r in rows]


def events(session: Session, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[Item]:
    E = MemoryEvent
    rows = session.execute(
        select(E.id, E.storage_config_id, E.storage_path, E.sync_status, E.storage_class)
        .where(E.tenant_id == tenant_id, E.id.in_(ids),
               _not_being_erased(tenant_id, SubjectErasure.user_id == E.subject_user_id))
        .order_by(E.id)).all()
    return [Item("event", r.id, r.storage_config_id, r.storage_path, r.sync_status,
                 r.storage_class) for r in rows]


def mark(session: Session, tenant_id: uuid.UUID, item: Item, storage_class: str) -> bool:
    """Record the class, only if the row still names the same synced object."""
    model: type[MemoryPointer] | type[MemoryEvent] = (
        MemoryPointer if item.kind == "pointer" else MemoryEvent)
    result = session.execute(
        update(model).where(model.tenant_id == tenant_id, model.id == item.id,
                            model.storage_path == item.storage_path,
                            model.sync_status == "synced")
        .values(storage_class=storage_class).execution_options(synchronize_session=False))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def path_named(session: Session, tenant_id: uuid.UUID, item: Item) -> bool:
    """Whether any row of the tenant still names the item's object."""
    model: type[MemoryPointer] | type[MemoryEvent] = (
        MemoryPointer if item.kind == "pointer" else MemoryEvent)
    return session.scalar(
        select(model.id).where(model.tenant_id == tenant_id,
                               model.storage_config_id == item.storage_config_id,
                               model.storage_path == item.storage_path).limit(1)) is not None
