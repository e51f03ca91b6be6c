"""SQL of the events domain; every query takes the tenant and filters by it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from ..db.base import utcnow
from ..db.models import MemoryEvent
from ..identity import EVERYTHING, Access


def get(session: Session, tenant_id: uuid.UUID, event_id: uuid.UUID) -> MemoryEvent | None:
    return session.scalar(select(MemoryEvent).execution_options(populate_existing=True)
                          .where(MemoryEvent.tenant_id == tenant_id,
                                 MemoryEvent.id == event_id))


def list_page(session: Session, tenant_id: uuid.UUID, *, scope: str | None,
              scope_ref: str | None, kind: str | None, since: datetime | None,
              until: datetime | None, include_compressed: bool,
              after: tuple[datetime, uuid.UUID] | None, limit: int,
              access: Access = EVERYTHING) -> Sequence[MemoryEvent]:
    query = select(MemoryEvent).where(MemoryEvent.tenant_id == tenant_id,
                                      MemoryEvent.sync_status != "pending_delete")
    from ..memories.visibility import visible_events  # past a policy: hidden until the run

    kept = visible_events(session, tenant_id, utcnow())
    if kept is not None:
        query = query.where(kept)
    if scope is not None:
        query = query.where(MemoryEvent.scope_type == scope)
    if scope_ref is not None:
        query = query.where(MemoryEvent.scope_ref == scope_ref)
    if kind is not None:
        query = query.where(MemoryEvent.kind == kind)
    if since is not None:
        query = query.where(MemoryEvent.occurred_at >= since)
    if until is not None:
        query = query.where(MemoryEvent.occurred_at < until)
    if not include_compressed:
        query = query.where(MemoryEvent.compressed_at.is_(None))
    visible = access.where(MemoryEvent.scope_type, MemoryEvent.scope_ref,
                           MemoryEvent.subject_user_id)
    if visible is not None:
        query = query.where(visible)
    if after is not None:
        at, last_id = after
        query = query.where(or_(MemoryEvent.occurred_at > at,
                                and_(MemoryEvent.occurred_at == at, MemoryEvent.id > last_id)))
    return session.scalars(query.order_by(MemoryEvent.occurred_at, MemoryEvent.id)
                           .limit(limit)).all()


def mark_corrupt(session: Session, event_id: uuid.UUID, storage_path: str) -> None:
    session.execute(update(MemoryEvent)
                    .where(MemoryEvent.id == event_id, MemoryEvent.storage_path == storage_path,
                           MemoryEvent.sync_status.in_(("synced", "corrupt")))
                    .values(sync_status="corrupt")
                    .execution_options(synchronize_session=False))


def mark_synced(session: Session, event_id: uuid.UUID, storage_path: str) -> None:
    session.execute(update(MemoryEvent)
                    .where(MemoryEvent.id == event_id, MemoryEvent.storage_path == storage_path,
                           MemoryEvent.sync_status == "corrupt")
                    .values(sync_status="synced")
                    .execution_options(synchronize_session=False))


def named_paths(session: Session, config_id: uuid.UUID, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` (in one bucket location) an event row names. An event's object is
    named after its id (``…/{event_id}.json``), so this is a primary-key lookup."""
    ids = {i for i in (event_id_of(p) for p in paths) if i is not None}
    if not ids:
        return set()
    wanted = set(paths)
    return {path for path in session.scalars(select(MemoryEvent.storage_path).where(
        MemoryEvent.id.in_(ids), MemoryEvent.storage_config_id == config_id))
        if path in wanted}


def event_id_of(path: str) -> uuid.UUID | None:
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(".json"):
        return None
    try:
        return uuid.UUID(name[:-5])
    except ValueError:
        return None


def owned_by(tenant_id: uuid.UUID, user_id: str) -> ColumnElement[bool]:
    """An event is the subject's if it names them, or lives in their ``user`` scope (as
    ``compliance.subjects.owned_by`` says of pointers)."""
    return and_(MemoryEvent.tenant_id == tenant_id,
                or_(MemoryEvent.subject_user_id == user_id,
                    and_(MemoryEvent.scope_type == "user", MemoryEvent.scope_ref == user_id)))


def subject_page(session: Session, tenant_id: uuid.UUID, user_id: str,
                 after: uuid.UUID | None, limit: int) -> Sequence[MemoryEvent]:
    query = select(MemoryEvent).execution_options(populate_existing=True).where(
        owned_by(tenant_id, user_id))
    if after is not None:
        query = query.where(MemoryEvent.id > after)
    return session.scalars(query.order_by(MemoryEvent.id).limit(limit)).all()


def subject_objects(session: Session, tenant_id: uuid.UUID, user_id: str,
                    limit: int) -> Sequence[Any]:
    """The first ``limit`` of the subject's events: id, storage_config_id, storage_path."""
    return session.execute(
        select(MemoryEvent.id, MemoryEvent.storage_config_id, MemoryEvent.storage_path)
        .where(owned_by(tenant_id, user_id)).order_by(MemoryEvent.id).limit(limit)).all()


def count_subject(session: Session, tenant_id: uuid.UUID, user_id: str) -> int:
    return int(session.scalar(select(func.count()).select_from(MemoryEvent)
                              .where(owned_by(tenant_id, user_id))) or 0)
