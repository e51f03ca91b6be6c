"""Erasures in progress and their signed receipts, legal holds, and retention policies."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, new_id, utcnow


class SubjectErasure(Base):
    """One row per erasure in progress: memory writes for this subject answer 409."""

    __tablename__ = "subject_erasures"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ErasureReceipt(Base):
    """A signed erasure receipt. ``body`` is what was signed: counts, hashes, times — the
    subject appears only as a salted hash."""

    __tablename__ = "erasure_receipts"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    signature: Mapped[str] = mapped_column(String(128))
    key_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RetentionPolicy(Base):
    """How long a scope's memories (of one memory type, or all of them; ``event`` covers the
    raw events) are kept; the daily retention run deletes or archives what is past it."""

    __tablename__ = "retention_policies"
    __table_args__ = (UniqueConstraint("tenant_id", "scope_type", "memory_type"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    scope_type: Mapped[str] = mapped_column(String(16))
    memory_type: Mapped[str] = mapped_column(String(64))  # "*": every type, events included
    retention_days: Mapped[int] = mapped_column(Integer)
    archive_after_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    auto_delete: Mapped[bool] = mapped_column(Boolean)
    # Memories and entries of this importance or more are kept whatever their age.
    keep_importance_at_least: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LegalHold(Base):
    """A legal hold on a data subject, a (scope, scope ref) or the whole tenant: retention,
    cleanup, deletes and erasure leave what it covers alone until it is lifted. While active
    it names the subject (or scope ref) in clear to match rows; lifting replaces that with a
    keyed hash (``subject_hash``, ``keys/pseudonyms.py``), so an erased subject leaves
    no clear id here."""

    __tablename__ = "legal_holds"
    __table_args__ = (Index(None, "tenant_id", "lifted_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    target: Mapped[str] = mapped_column(String(16))  # subject | scope | tenant
    user_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    scope_type: Mapped[str | None] = mapped_column(String(16), nullable=True)
    scope_ref: Mapped[str | None] = mapped_column(String(256), nullable=True)
    subject_hash: Mapped[str | None] = mapped_column(String(128), nullable=True)
    reason: Mapped[str] = mapped_column(String(32))
    created_by: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    lifted_by: Mapped[str | None] = mapped_column(String(256), nullable=True)
    lifted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
