"""What belongs to a data subject, on both planes: the queries and prefixes that export and
erasure share."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from ..db.models import MemoryPointer, StorageConfig
from ..plane.data_plane import DataPlane, Target


def owned_by(tenant_id: uuid.UUID, user_id: str) -> ColumnElement[bool]:
    """A pointer is the subject's if it names them, or lives in their ``user`` scope."""
    return and_(
        MemoryPointer.tenant_id == tenant_id,
        or_(MemoryPointer.subject_user_id == user_id,
            and_(MemoryPointer.scope_type == "user", MemoryPointer.scope_ref == user_id)),
    )


def pointer_page(session: Session, tenant_id: uuid.UUID, user_id: str,
                 after: uuid.UUID | None, limit: int) -> Sequence[MemoryPointer]:
    query = select(MemoryPointer).execution_options(populate_existing=True).where(
        owned_by(tenant_id, user_id))
    if after is not None:
        query = query.where(MemoryPointer.id > after)
    return session.scalars(query.order_by(MemoryPointer.id).limit(limit)).all()


def object_page(session: Session, tenant_id: uuid.UUID, user_id: str,
                limit: int) -> Sequence[Any]:
    """The first ``limit`` of the subject's pointers, only what deleting their objects needs
    (id, storage_config_id, storage_path, embedding_storage_path): rows, not ORM objects."""
    return session.execute(
        select(MemoryPointer.id, MemoryPointer.storage_config_id, MemoryPointer.storage_path,
               MemoryPointer.embedding_storage_path)
        .where(owned_by(tenant_id, user_id)).order_by(MemoryPointer.id).limit(limit)
    ).all()


def count_pointers(session: Session, tenant_id: uuid.UUID, user_id: str) -> int:
    return int(session.scalar(
        select(func.count()).select_from(MemoryPointer).where(owned_by(tenant_id, user_id))
    ) or 0)


def user_prefix(user_id: str) -> str:
    """The subject's own directory under a target's prefix (scope ``user``)."""
    return f"memories/user/{quote(user_id, safe='')}/"


def key_dir(pointer: MemoryPointer) -> str:
    """The directory holding every version of one pointer's object (``…/<key>/``)."""
    return pointer.storage_path.rsplit("/", 1)[0] + "/"


def targets(session: Session, plane: DataPlane, tenant_id: uuid.UUID) -> list[Target]:
    """Every bucket location the tenant has written to (old configurations included)."""
    ids = session.scalars(
        select(StorageConfig.id).where(StorageConfig.tenant_id == tenant_id)
        .order_by(StorageConfig.created_at)
    ).all()
    return [plane.by_id(session, config_id) for config_id in ids]

