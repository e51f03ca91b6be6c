"""Background jobs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, new_id, utcnow


class Job(Base):
    """Background work (export, erase, …). ``progress`` records each finished step, so a
    worker that takes over an expired lease continues where the last one stopped.
    ``progress`` and ``result`` hold counts, ids and hashes only — never content."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index(None, "state", "created_at"),
        Index(None, "tenant_id", "kind", "subject"),
        Index(None, "tenant_id", "claimed_at"),
        Index(None, "expires_at"),
        # One job per key and tenant (the compactor's daily run: "compact:<UTC date>"), so
        # schedulers racing on several workers enqueue it once; NULL for other jobs.
        Index("ux_jobs_tenant_id_dedupe_key", "tenant_id", "dedupe_key", unique=True),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    # The data subject while the job runs; an erasure replaces it with a keyed hash.
    subject: Mapped[str | None] = mapped_column(String(256), nullable=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # When a worker last claimed it: the claim query serves the tenant waiting longest.
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # An export's archive is deleted from the bucket after this (cleared once it is).
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    dedupe_key: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # The request that queued it (its X-Request-Id): the worker logs under it too.
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
