"""Storage configuration rows: one active (the default) per tenant, named ones kept listed,
older unnamed ones kept (retired) for their pointers."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ..db.models import AgentSettings, MemoryEvent, MemoryPointer, StorageConfig, Tenant


def active(session: Session, tenant_id: uuid.UUID) -> StorageConfig | None:
    return session.scalar(
        select(StorageConfig)
        .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active)
        .order_by(StorageConfig.created_at.desc()).limit(1)
    )


def lock_tenant(session: Session, tenant_id: uuid.UUID) -> None:
    """Changes of a tenant's configurations take turns on its row."""
    session.scalar(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())


def replace_active(session: Session, tenant_id: uuid.UUID, config: StorageConfig) -> None:
    """In the open write transaction: retire the tenant's active row(s), add ``config``.

    The tenant row is locked first so two concurrent changes take turns and exactly one
    configuration ends up active. A named configuration that stops being the default stays
    listed; an unnamed one is retired (kept only for the pointers written under it).
    """
    lock_tenant(session, tenant_id)
    _retire_default(session, tenant_id, config.created_at)
    config.is_active = True
    session.add(config)
    session.flush()


def make_default(session: Session, tenant_id: uuid.UUID, config: StorageConfig,
                 now: datetime) -> None:
    """In the open write transaction (tenant row locked): ``config`` becomes the default."""
    _retire_default(session, tenant_id, now)
    config.is_active = True
    session.flush()


def _retire_default(session: Session, tenant_id: uuid.UUID, now: datetime) -> None:
    session.execute(
        update(StorageConfig)
        .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active,
               StorageConfig.name.is_(None))
        .values(is_active=False, retired_at=now)
    )
    session.execute(
        update(StorageConfig)
        .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active)
        .values(is_active=False)
    )


def listed(session: Session, tenant_id: uuid.UUID) -> Sequence[StorageConfig]:
    """The configurations a tenant sees: the default, then named ones by creation."""
    return session.scalars(
        select(StorageConfig)
        .where(StorageConfig.tenant_id == tenant_id, StorageConfig.retired_at.is_(None),
               StorageConfig.is_active | StorageConfig.name.is_not(None))
        .order_by(StorageConfig.is_active.desc(), StorageConfig.created_at, StorageConfig.id)
    ).all()


def get_listed(session: Session, tenant_id: uuid.UUID, config_id: uuid.UUID, *,
               lock: bool = False) -> StorageConfig | None:
    query = select(StorageConfig).where(
        StorageConfig.tenant_id == tenant_id, StorageConfig.id == config_id,
        StorageConfig.retired_at.is_(None),
        StorageConfig.is_active | StorageConfig.name.is_not(None))
    if lock:
        query = query.with_for_update()
    return session.scalar(query)


def name_taken(session: Session, tenant_id: uuid.UUID, name: str,
               other_than: uuid.UUID | None = None) -> bool:
    query = select(StorageConfig.id).where(
        StorageConfig.tenant_id == tenant_id, StorageConfig.retired_at.is_(None),
        func.lower(StorageConfig.name) == name.lower())
    if other_than is not None:
        query = query.where(StorageConfig.id != other_than)
    return session.scalar(query.limit(1)) is not None


def contents(session: Session, tenant_id: uuid.UUID,
             config_id: uuid.UUID) -> tuple[int, int]:
    """How many pointers and events live in the configuration."""
    pointers = session.scalar(select(func.count()).select_from(MemoryPointer).where(
        MemoryPointer.tenant_id == tenant_id, MemoryPointer.storage_config_id == config_id))
    events = session.scalar(select(func.count()).select_from(MemoryEvent).where(
        MemoryEvent.tenant_id == tenant_id, MemoryEvent.storage_config_id == config_id))
    return int(pointers or 0), int(events or 0)


def agents_routed_to(session: Session, tenant_id: uuid.UUID,
                     config_id: uuid.UUID) -> Sequence[str]:
    return session.scalars(
        select(AgentSettings.agent_id).where(
            AgentSettings.tenant_id == tenant_id,
            AgentSettings.user_memory_storage_config_id == config_id)
        .order_by(AgentSettings.agent_id)
    ).all()
