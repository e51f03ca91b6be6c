"""Memories and what is derived from them: pointers, raw events, the compactor's
entries' provenance and blind-index terms, search segments, and orphan-GC candidates.
Metadata only: the content lives in the tenant's bucket (I7)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    Uuid,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, BigId, UTCDateTime, new_id, utcnow

VECTOR_SUFFIX = ".vec"  # a memory's vector object is its content object's path + this

# A synced, searchable memory whose vector is missing or was made for older content: the
# search indexer's work. The partial index on it holds only those rows, so the indexer's look
# costs what waits, not what the table holds (memories written unsearchable, such as agent
# checkpoints, and memories embedded long ago). Queries name it word for word
# (``search.index_rows.wants_vector``), so both databases see it implies the index.
WANTS_VECTOR = ("sync_status = 'synced' AND searchable AND (NOT has_embeddings"
                " OR embedding_storage_path IS NULL"
                f" OR embedding_storage_path <> storage_path || '{VECTOR_SUFFIX}')")


class MemoryPointer(Base):
    __tablename__ = "memory_pointers"
    __table_args__ = (
        UniqueConstraint("tenant_id", "scope_type", "scope_ref", "key"),
        Index(None, "tenant_id", "scope_type", "scope_ref", "id"),
        Index(None, "tenant_id", "subject_user_id"),
        Index(None, "sync_status", "updated_at"),
        Index("ix_memory_pointers_wanting_vectors", "updated_at",
              postgresql_where=text(WANTS_VECTOR), sqlite_where=text(WANTS_VECTOR)),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    scope_type: Mapped[str] = mapped_column(String(16))
    scope_ref: Mapped[str] = mapped_column(String(256))
    key: Mapped[str | None] = mapped_column(String(256), nullable=True)
    memory_type: Mapped[str] = mapped_column(String(64))
    subject_user_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    title: Mapped[str | None] = mapped_column(String(500), nullable=True)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    importance: Mapped[int] = mapped_column(Integer, default=3)
    source: Mapped[str] = mapped_column(String(16), default="api")
    storage_config_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("storage_configs.id"))
    storage_path: Mapped[str] = mapped_column(String(1024))
    content_sha256: Mapped[str] = mapped_column(String(64))
    content_size: Mapped[int] = mapped_column(BigId)
    sync_status: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer, default=1)
    has_embeddings: Mapped[bool] = mapped_column(Boolean, default=False)
    embedding_model: Mapped[str | None] = mapped_column(String(128), nullable=True)
    embedding_storage_path: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The backend's name of the class the object was moved to (control_plane/archive); None:
    # the bucket's default class. Last, as the column was added last (hot-path RETURNING *).
    storage_class: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # False: never embedded, never found by search (written with ``searchable: false``).
    searchable: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # When a read last restarted the ttl (refresh_ttl); the ttl is expires_at minus the later
    # of this and updated_at (a write sets both from one clock reading). Added last.
    ttl_restarted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class GcCandidate(Base):
    """Orphan GC phase 1: an object no pointer named when it was marked. Phase 2 deletes it
    only if, a grace period later, still no pointer names it, and keeps the row as a
    tombstone (``swept_at``) for ``reconcile.TOMBSTONE_SECONDS``: a write still in flight
    that put that object never adopts a candidate or a tombstone (``memories.hotpath``)."""

    __tablename__ = "gc_candidates"

    storage_config_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("storage_configs.id", ondelete="CASCADE"), primary_key=True
    )
    path: Mapped[str] = mapped_column(String(1024), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    marked_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    swept_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class MemoryEvent(Base):
    """One raw event of the append-only log (Jet). The body lives in the bucket; the row is
    never updated except ``compressed_at`` (set by the compactor) and ``sync_status``."""

    __tablename__ = "memory_events"
    __table_args__ = (
        Index(None, "tenant_id", "scope_type", "scope_ref", "occurred_at", "id"),
        Index(None, "tenant_id", "subject_user_id"),
        Index("ix_memory_events_uncompressed", "tenant_id", "scope_type", "scope_ref",
              "occurred_at", postgresql_where=text("compressed_at IS NULL"),
              sqlite_where=text("compressed_at IS NULL")),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    scope_type: Mapped[str] = mapped_column(String(16))
    scope_ref: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(64), default="api")
    source_ref: Mapped[str | None] = mapped_column(String(256), nullable=True)
    subject_user_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    compressed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    storage_config_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("storage_configs.id"))
    storage_path: Mapped[str] = mapped_column(String(1024))
    content_sha256: Mapped[str] = mapped_column(String(64))
    content_size: Mapped[int] = mapped_column(BigId)
    sync_status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The class its object was moved to (control_plane/archive); None: the default class.
    storage_class: Mapped[str | None] = mapped_column(String(32), nullable=True)


class Compaction(Base):
    """Provenance of one compactor entry (the pointer with the same id): which summariser
    wrote it. The events it covers are in ``compaction_events``. No content (I7)."""

    __tablename__ = "compactions"
    __table_args__ = (Index(None, "tenant_id", "scope_type", "scope_ref"),)

    id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("memory_pointers.id", ondelete="CASCADE"), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    scope_type: Mapped[str] = mapped_column(String(16))
    scope_ref: Mapped[str] = mapped_column(String(256))
    provider: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    prompt_version: Mapped[str] = mapped_column(String(32))
    event_count: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CompactionEvent(Base):
    """One event a compactor entry covers, with the SHA-256 its body had when summarised."""

    __tablename__ = "compaction_events"
    __table_args__ = (Index(None, "event_id"),)

    compaction_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("compactions.id", ondelete="CASCADE"), primary_key=True)
    event_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    event_sha256: Mapped[str] = mapped_column(String(64))


class EntryTerm(Base):
    """One word of an entry's title or summary as a keyed blind index (``entries/terms.py``):
    a truncated HMAC under a per-tenant key the database does not hold, never the word (I7).
    Deleted with its entry (the foreign key cascades; SQLite enforces it too)."""

    __tablename__ = "entry_terms"
    __table_args__ = (Index(None, "tenant_id", "term"),)

    pointer_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("memory_pointers.id", ondelete="CASCADE"), primary_key=True)
    term: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))


class SearchSegment(Base):
    """One vector segment of a scope's search index: a snapshot or a delta object in the
    tenant's bucket (encrypted; vectors and the texts they were made from). The row holds
    only where it lives and what it covers; search reads the live pointers to filter it."""

    __tablename__ = "search_segments"
    __table_args__ = (
        Index(None, "tenant_id", "scope_type", "scope_ref"),
        Index(None, "storage_config_id", "storage_path"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    scope_type: Mapped[str] = mapped_column(String(16))
    scope_ref: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(16))
    embedding_model: Mapped[str] = mapped_column(String(128))
    storage_config_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("storage_configs.id", ondelete="CASCADE"))
    storage_path: Mapped[str] = mapped_column(String(1024))
    rows: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
