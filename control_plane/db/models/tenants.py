"""Tenants, their API keys and where their content lives."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, LargeBinary, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, new_id, utcnow


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    key_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200))
    can_create_tenants: Mapped[bool] = mapped_column(Boolean, default=False)
    # The access list of a scoped agent key: [{"scope", "scope_ref"}], "*" for any ref of a
    # scope; NULL for a key that sees the whole tenant.
    scopes: Mapped[list[dict[str, str]] | None] = mapped_column(JSON, nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # A data subject's own key (role ``user``): the user id it reads and writes for.
    user_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    # When the key was last accepted, to the hour (written at most once an hour per key).
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class StorageConfig(Base):
    """Where a tenant's content lives. Rows are never rewritten in place: a new configuration
    is a new row, so pointers written under an old one stay readable from where they were."""

    __tablename__ = "storage_configs"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    storage_type: Mapped[str] = mapped_column(String(16))  # default|local|s3|gcs|azure
    bucket: Mapped[str | None] = mapped_column(String(255), nullable=True)
    prefix: Mapped[str] = mapped_column(String(255), default="")
    region: Mapped[str | None] = mapped_column(String(64), nullable=True)
    endpoint: Mapped[str | None] = mapped_column(String(255), nullable=True)
    connection_config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    credentials_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    kek_ref: Mapped[str | None] = mapped_column(String(255), nullable=True)
    versioning: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    soft_delete_days: Mapped[float | None] = mapped_column(nullable=True)
    object_lock: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # A named configuration (POST /v1/storage/configs) stays listed while not the default;
    # retired_at marks a row that is no longer offered (replaced unnamed default, deleted).
    name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
