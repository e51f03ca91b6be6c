"""The witnesses a tenant registered for its audit log (control_plane/audit/witnesses.py)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, BigId, UTCDateTime, new_id, utcnow


class AuditWitness(Base):
    """One witness of a tenant's audit log, in the order the tenant listed them. The last
    three columns are what the server last heard from it: the tree size it has cosigned (its
    200, or the size its 409 named), the outcome of the last request (a generic code) and
    when."""

    __tablename__ = "audit_witnesses"
    __table_args__ = (UniqueConstraint("tenant_id", "position"),
                      UniqueConstraint("tenant_id", "verifier_key"))

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(String(1024))
    verifier_key: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    cosigned_size: Mapped[int] = mapped_column(BigId, default=0)
    last_status: Mapped[str | None] = mapped_column(String(64), nullable=True)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
