"""The audit log: its rows, the end of each tenant's sealed chain, and the tiles of its Merkle
tree."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, BigId, UTCDateTime, utcnow


class AccessLog(Base):
    """Append-only audit rows. ``seq``, ``prev_hash`` and ``row_hash`` are filled in by the
    sealer, which chains rows per tenant in order without making writers wait on a lock."""

    __tablename__ = "access_logs"
    __table_args__ = (
        # Unique among sealed rows: an unsealed row (seq NULL) is not in it (migration 0050).
        Index("uq_access_logs_sealed_seq", "tenant_id", "seq", unique=True,
              postgresql_where=text("seq IS NOT NULL"), sqlite_where=text("seq IS NOT NULL")),
        Index("ix_access_logs_unsealed", "tenant_id", "id",
              postgresql_where=text("seq IS NULL"), sqlite_where=text("seq IS NULL")),
        Index(None, "tenant_id", "pointer_id"),
        Index(None, "tenant_id", "accessed_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    seq: Mapped[int | None] = mapped_column(BigId, nullable=True)
    pointer_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    event_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    accessor_type: Mapped[str] = mapped_column(String(16))
    accessor_id: Mapped[str] = mapped_column(String(256))
    agent_id: Mapped[str | None] = mapped_column(String(256), nullable=True)  # agent keys'
    operation: Mapped[str] = mapped_column(String(32))
    success: Mapped[bool] = mapped_column(Boolean)
    detail: Mapped[str] = mapped_column(Text, default="")
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    accessed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    prev_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    row_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)


class AuditHead(Base):
    """The end of each tenant's sealed chain; the sealer locks this row, writers never do."""

    __tablename__ = "audit_heads"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    last_seq: Mapped[int] = mapped_column(BigId, default=0)
    last_hash: Mapped[str] = mapped_column(String(64))
    sealed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The latest signed checkpoint written into the tenant's bucket (audit/checkpoints.py).
    anchored_seq: Mapped[int] = mapped_column(BigId, default=0, server_default="0")
    anchored_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    anchor_attempted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    anchor_problem: Mapped[str | None] = mapped_column(String(64), nullable=True)
    anchor_config_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    # The leaves the Merkle tree's tiles hold (audit/tree.py): the head's last_seq once every
    # sealed row is in the tree; behind it only until a tenant sealed before the tree existed
    # is built (the sealer does that first).
    tree_size: Mapped[int] = mapped_column(BigId, default=0, server_default="0")
    # The latest tlog checkpoint (a signed note) written into the tenant's bucket, and when
    # writing one was last claimed (audit/tlog_anchor.py).
    tlog_size: Mapped[int] = mapped_column(BigId, default=0, server_default="0")
    tlog_attempted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Until when one writer holds the tenant's checkpoint writing (audit/tlog_anchor.py); None
    # when no one does.
    tlog_claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AuditTile(Base):
    """The stored hashes of a tenant's audit Merkle tree, as C2SP tlog tiles of height 8: the
    tile (level, index) holds the hashes of the tree's nodes at height 8·level, indexes
    256·index to 256·index + 255, each 32 bytes, concatenated in order. The tile at the right
    edge grows (the sealer appends) until it holds 256; a full tile never changes."""

    __tablename__ = "audit_tiles"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    idx: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=False)
    hashes: Mapped[bytes] = mapped_column(LargeBinary)
