"""Embedder configuration rows: at most one per tenant."""

from __future__ import annotations

import uuid

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..db.models import EmbedderConfig, Tenant


def get(session: Session, tenant_id: uuid.UUID) -> EmbedderConfig | None:
    return session.scalar(select(EmbedderConfig).where(EmbedderConfig.tenant_id == tenant_id))


def replace(session: Session, tenant_id: uuid.UUID, config: EmbedderConfig) -> None:
    """In the open write transaction: the tenant's configuration becomes ``config``. The
    tenant row is locked first so two concurrent changes take turns."""
    session.scalar(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())
    session.execute(delete(EmbedderConfig).where(EmbedderConfig.tenant_id == tenant_id))
    session.add(config)
    session.flush()


def remove(session: Session, tenant_id: uuid.UUID) -> uuid.UUID | None:
    """Delete the tenant's configuration; the id it had, or None."""
    session.scalar(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())
    config_id = session.scalar(select(EmbedderConfig.id)
                               .where(EmbedderConfig.tenant_id == tenant_id))
    if config_id is not None:
        session.execute(delete(EmbedderConfig).where(EmbedderConfig.id == config_id))
    return config_id
