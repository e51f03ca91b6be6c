"""Every table of the control plane. Metadata only: no memory content lives here (I7)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, new_id, utcnow

BigId = BigInteger().with_variant(Integer(), "sqlite")


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


VECTOR_SUFFIX = ".vec"  # a memory's vector object is its content object's path + this

# A synced, searchable memory whose vector is missing or was made for older content: the
# search indexer's work. The partial index on it holds only those rows, so the indexer's look
# costs what waits, not what the table holds (memories written unsearchable, such as agent
# checkpoints, and memories embedded long ago). Queries name it word for word
# (``search.repository.wants_vector``), so both databases see it implies the index.
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


class AccessLog(Base):
    """Append-only audit rows. ``seq``, ``prev_hash`` and ``row_hash`` are filled in by the
    sealer, which chains rows per tenant in order without making writers wait on a lock."""

    __tablename__ = "access_logs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "seq"),
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


class IdempotentResponse(Base):
    """The first answer to a write sent with an Idempotency-Key (metadata only). Keys are
    the caller's own: one per API key (``accessor_id``, as the audit log names it)."""

    __tablename__ = "idempotency_keys"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    accessor_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int] = mapped_column(Integer)
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


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


class SummarizerConfig(Base):
    """A tenant's summariser: an OpenAI-compatible chat endpoint. One row per
    tenant; no row means the built-in offline summariser. The API key is sealed with the
    server key like bucket credentials (plane/credentials.py), bound to this row."""

    __tablename__ = "summarizer_configs"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), unique=True)
    provider: Mapped[str] = mapped_column(String(32))
    base_url: Mapped[str] = mapped_column(String(1024))
    model: Mapped[str] = mapped_column(String(128))
    api_key_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    timeout_ms: Mapped[int] = mapped_column(Integer)
    max_retries: Mapped[int] = mapped_column(Integer)
    token_budget_per_run: Mapped[int | None] = mapped_column(BigId, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CompactorSettings(Base):
    """A tenant's compactor thresholds; a tenant without a row uses the defaults."""

    __tablename__ = "compactor_settings"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    min_events: Mapped[int] = mapped_column(Integer)
    older_than_days: Mapped[int] = mapped_column(Integer)
    enabled: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


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


class AgentSettings(Base):
    """An agent as a resource: its name and its user-memory settings (the seed's
    ``agents.update({memory: {userMemory: {...}}})``). No row: user memory enabled, the
    tenant's default storage, no retention of its own."""

    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("tenant_id", "agent_id"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(String(256))
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    user_memory_enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    user_memory_retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    user_memory_storage_config_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("storage_configs.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EmbedderConfig(Base):
    """A tenant's embedder: an OpenAI-compatible embeddings endpoint. One row per tenant; no
    row means the server's default embedder. The API key is sealed with the server key like
    the summariser's, bound to this row. ``dim`` is what the probe answered."""

    __tablename__ = "embedder_configs"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), unique=True)
    provider: Mapped[str] = mapped_column(String(32))
    base_url: Mapped[str] = mapped_column(String(1024))
    model: Mapped[str] = mapped_column(String(128))
    dim: Mapped[int] = mapped_column(Integer)
    api_key_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    timeout_ms: Mapped[int] = mapped_column(Integer)
    max_retries: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Conversation(Base):
    """A conversation's token accounting (metadata only: its messages and summary are keyed
    memories in the bucket, scope ``conversation``). ``context_window_tokens`` counts the
    messages after ``summarized_through``; ``subject_user_id`` is removed by erasure."""

    __tablename__ = "conversations"
    __table_args__ = (
        UniqueConstraint("tenant_id", "conversation_id"),
        Index(None, "tenant_id", "subject_user_id"),
        Index(None, "needs_summarization", "updated_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    conversation_id: Mapped[str] = mapped_column(String(256))
    subject_user_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    model: Mapped[str] = mapped_column(String(128))
    context_window_limit: Mapped[int] = mapped_column(Integer)
    context_window_tokens: Mapped[int] = mapped_column(Integer, default=0)
    needs_summarization: Mapped[bool] = mapped_column(Boolean, default=False)
    summary_pointer_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    summarized_through: Mapped[int] = mapped_column(Integer, default=0)
    summary_tokens: Mapped[int] = mapped_column(Integer, default=0)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    # The last sequence number handed out; a message whose write never finished leaves a gap.
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    # The summarisation job queued or running for it (one at a time); NULL when none.
    summary_job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ConversationMessage(Base):
    """One message's place and size (its text is the keyed memory ``m/<seq>``)."""

    __tablename__ = "conversation_messages"

    conversation_row_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    pointer_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    role: Mapped[str] = mapped_column(String(16))
    tokens: Mapped[int] = mapped_column(Integer)
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
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LegalHold(Base):
    """A legal hold on a data subject, a (scope, scope ref) or the whole tenant: retention,
    cleanup, deletes and erasure leave what it covers alone until it is lifted. While active
    it names the subject (or scope ref) in clear to match rows; lifting replaces that with a
    keyed hash (``subject_hash``, ``compliance/pseudonyms.py``), so an erased subject leaves
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
