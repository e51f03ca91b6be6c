"""Encryption keys: tenants' key-encryption key versions and the wrapped subject keys."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, LargeBinary, String, UniqueConstraint, Uuid, text
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, new_id, utcnow


class KekVersion(Base):
    """One version of a tenant's key-encryption key: where it lives (a local key ring entry
    or a KMS key) — never the key material itself."""

    __tablename__ = "kek_versions"
    __table_args__ = (UniqueConstraint("tenant_id", "version"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    provider: Mapped[str] = mapped_column(String(16))  # local | aws-kms
    key_ref: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SubjectKey(Base):
    """A data subject's (``user``/<user id>) or a scope's key, stored only wrapped by a KEK
    version. Crypto-shredding clears ``wrapped_key`` and sets ``destroyed_at``."""

    __tablename__ = "subject_keys"
    __table_args__ = (
        Index("ux_subject_keys_active", "tenant_id", "scope_type", "scope_ref", unique=True,
              postgresql_where=text("destroyed_at IS NULL"),
              sqlite_where=text("destroyed_at IS NULL")),
        Index(None, "kek_version_id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    scope_type: Mapped[str] = mapped_column(String(16))
    scope_ref: Mapped[str] = mapped_column(String(256))
    kek_version_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("kek_versions.id"))
    wrapped_key: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    rewrapped_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    destroyed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
