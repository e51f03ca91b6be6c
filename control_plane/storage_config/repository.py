"""Storage configuration rows: one active per tenant, older ones kept for their pointers."""

from __future__ import annotations

import uuid

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..db.models import StorageConfig, Tenant


def active(session: Session, tenant_id: uuid.UUID) -> StorageConfig | None:
    return session.scalar(
        select(StorageConfig)
        .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active)
        .order_by(StorageConfig.created_at.desc()).limit(1)
    )


def replace_active(session: Session, tenant_id: uuid.UUID, config: StorageConfig) -> None:
    """In the open write transaction: retire the tenant's active row(s), add ``config``.

    The tenant row is locked first so two concurrent changes take turns and exactly one
    configuration ends up active.
    """
    session.scalar(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())
    session.execute(
        update(StorageConfig)
        .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active)
        .values(is_active=False)
    )
    config.is_active = True
    session.add(config)
    session.flush()
