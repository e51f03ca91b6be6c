"""A tenant's DLP policy (control_plane/dlp): what explicit writes are screened for and
what happens to a detected value. No row: the defaults (docs/dlp.md). Holds no values."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, utcnow


class DlpPolicy(Base):
    """One row per tenant that set a policy: the mode (off, flag, redact, refuse) and the
    kinds detected, comma-separated (null: every kind)."""

    __tablename__ = "dlp_policies"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    kinds: Mapped[str | None] = mapped_column(String(256), nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
