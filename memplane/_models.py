"""Typed views of the server's JSON answers.

Every model allows extra fields, so a newer server adding a field never breaks an older
client; the extra values stay reachable through ``model_extra``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AuditEntry",
    "AuditVerification",
    "CompactorConfig",
    "CreatedKey",
    "CreatedTenant",
    "Entry",
    "Event",
    "EventWithBody",
    "Memory",
    "Page",
    "Pointer",
    "Provenance",
    "ProvenanceEvent",
    "RememberDecision",
    "Remembered",
    "SearchResult",
    "SearchResults",
    "StorageConfig",
    "StorageHealth",
    "SummarizerConfig",
    "Tenant",
]

T = TypeVar("T")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Pointer(_Model):
    """Metadata of one stored memory; the content itself lives in the tenant's bucket."""

    id: str
    # The seed's MemoryPointer fields: the tenant, and the team of team scope (else None).
    tenant_id: str | None = None
    team_id: str | None = None
    scope: str
    scope_ref: str
    key: str | None = None
    memory_type: str | None = None
    title: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: int | None = None
    source: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    storage_path: str | None = None
    content_sha256: str | None = None
    content_size: int | None = None
    sync_status: str | None = None
    version: int
    has_embeddings: bool = False
    embedding_model: str | None = None
    embedding_storage_path: str | None = None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    # The storage class the archive tier moved its object to (backend's name); None: default.
    storage_class: str | None = None
    # False: never embedded, never found by search (written with searchable=False).
    searchable: bool = True


class Memory(_Model):
    """A memory read by key: its JSON value and its pointer."""

    value: Any
    pointer: Pointer


class Page(_Model, Generic[T]):
    """One page of a list endpoint; pass ``next_cursor`` back to get the next one."""

    items: list[T]
    next_cursor: str | None = None


class AuditEntry(_Model):
    """One access record; ``seq`` is None until the entry is sealed into the hash chain.
    ``leaf`` is the base64 of the exact bytes it is in the audit log's Merkle tree as
    (None until sealed): ``SHA-256(0x00 ‖ leaf)`` is what an inclusion proof proves."""

    seq: int | None = None
    pointer_id: str | None = None
    accessor_type: str
    accessor_id: str | None = None
    agent_id: str | None = None
    operation: str
    success: bool
    detail: Any = None
    request_id: str | None = None
    accessed_at: datetime
    leaf: str | None = None


class AuditVerification(_Model):
    """The outcome of checking the audit hash chain."""

    ok: bool
    checked: int
    unsealed: int
    first_bad_seq: int | None = None
    problem: str | None = None
    # Against the signed checkpoints in the tenant's own bucket.
    checkpoints_checked: int = 0
    first_checkpoint_seq: int | None = None
    last_checkpoint_seq: int | None = None
    first_bad_checkpoint: int | None = None
    head_seq: int = 0
    anchored_seq: int = 0
    anchor_lag_seconds: float | None = None
    anchor_problem: str | None = None
    anchors_checked: int = 0
    anchor_moves: int = 0
    anchors_unreadable: list[str] = Field(default_factory=list)


class CreatedKey(_Model):
    """A new API key; ``api_key`` is shown once and cannot be read back later."""

    id: str
    role: str
    name: str
    scopes: list[dict[str, str]] | None = None
    agent_id: str | None = None
    user_id: str | None = None
    api_key: str = Field(repr=False)


class ApiKey(_Model):
    """An API key as ``client.keys.list()`` shows it: never its secret."""

    id: str
    prefix: str
    role: str
    name: str
    scopes: list[dict[str, str]] | None = None
    agent_id: str | None = None
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class ApiKeyList(_Model):
    items: list[ApiKey]


class Tenant(_Model):
    """A tenant: the unit of isolation an API key belongs to."""

    id: str
    name: str


class CreatedTenant(_Model):
    """A new tenant and its first admin key (shown once)."""

    tenant: Tenant
    api_key: str = Field(repr=False)


class StorageConfig(_Model):
    """The tenant's active bucket configuration. Secrets are never returned: ``secrets_set``
    names the ones stored (encrypted) on the server."""

    id: str
    storage_type: str
    bucket: str | None = None
    prefix: str
    region: str | None = None
    endpoint: str | None = None
    connection_config: dict[str, Any] = Field(default_factory=dict)
    secrets_set: list[str] = Field(default_factory=list)
    versioning: bool | None = None
    soft_delete_days: float | None = None
    object_lock: bool | None = None
    is_active: bool = True
    created_at: datetime
    # Several configurations per tenant: the public id agents name, and residency.
    storage_config_id: str | None = None
    name: str | None = None
    is_default: bool = True
    declared_region: str | None = None
    region_verified: bool = False


class StorageHealth(_Model):
    """The outcome of a write/read/delete probe of the tenant's bucket, with what it keeps."""

    ok: bool
    reachable: bool
    probe: str
    # unreachable | auth_failed | bucket_not_found | permission_denied | endpoint_not_allowed
    problem: str | None = None
    latency_ms: float
    config_id: str
    storage_type: str
    bucket: str | None = None
    prefix: str
    region: str | None = None
    versioning: bool | None = None
    soft_delete_days: float | None = None
    object_lock: bool | None = None
    retention_days: float | None = None
    notes: list[str] = Field(default_factory=list)
    checked_at: datetime
    storage_config_id: str | None = None
    declared_region: str | None = None
    region_verified: bool = False


class Event(_Model):
    """One raw event of the append-only log (metadata; the body lives in the tenant's
    bucket). ``compressed_at`` is set once the compactor has summarised it into an entry."""

    id: str
    scope: str
    scope_ref: str
    kind: str
    source: str | None = None
    source_ref: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    occurred_at: datetime
    compressed_at: datetime | None = None
    storage_path: str | None = None
    content_sha256: str | None = None
    content_size: int | None = None
    sync_status: str | None = None
    created_at: datetime | None = None
    # The storage class the archive tier moved its body to (backend's name); None: default.
    storage_class: str | None = None


class EventWithBody(Event):
    """An event read by id: its metadata and its Markdown body (hash-verified)."""

    body: str


class Entry(Pointer):
    """A curated entry: a pointer without a key, and its Markdown ``summary`` read from the
    bucket (None where a listing leaves it out)."""

    summary: str | None = None


class SummarizerConfig(_Model):
    """The tenant's summariser: an OpenAI-compatible chat endpoint, or the built-in offline
    extractive one (``provider='extractive'``). The API key is never returned:
    ``has_api_key`` says whether one is stored."""

    provider: str
    base_url: str | None = None
    model: str
    has_api_key: bool = False
    timeout_seconds: float | None = None
    max_retries: int | None = None
    token_budget_per_run: int | None = None
    prompt_version: str | None = None
    configured_at: datetime | None = None


class CompactorConfig(_Model):
    """The tenant's compactor thresholds and the server's schedule (cron, UTC)."""

    min_events: int
    older_than_days: int
    enabled: bool
    schedule: str
    next_run_at: datetime | None = None
    updated_at: datetime | None = None


class ProvenanceEvent(_Model):
    """One event a compactor entry summarises, with its body's SHA-256 at the time."""

    event_id: str
    event_sha256: str


class Provenance(_Model):
    """Where a compactor entry comes from: the summariser and every event it read."""

    entry_id: str
    scope: str
    scope_ref: str
    provider: str
    model: str
    prompt_version: str
    event_count: int
    job_id: str | None = None
    created_at: datetime
    events: list[ProvenanceEvent] = Field(default_factory=list)


class SearchResult(_Model):
    """One search hit: what it is (``memory`` by key, ``entry`` or ``knowledge`` chunk),
    where it lives, its fused score and its value, verified against its SHA-256 (None when
    the search asked for no values)."""

    kind: str
    pointer_id: str
    scope: str
    scope_ref: str
    key: str | None = None
    title: str | None = None
    memory_type: str
    tags: list[str] = Field(default_factory=list)
    score: float
    value: Any = None


class SearchResults(_Model):
    """The hits, best first, and the embedder that made the query's vector."""

    results: list[SearchResult]
    embedder: str
    took_ms: float


class KnowledgeDocumentAdded(_Model):
    """A document ``add_knowledge`` stored: its id and how many chunks it was cut into."""

    document_id: str
    title: str
    chunk_count: int
    characters: int


class KnowledgeAdded(_Model):
    """What ``add_knowledge`` answers: the agent and its new documents, in request order."""

    agent_id: str
    documents: list[KnowledgeDocumentAdded]


class KnowledgeDocument(_Model):
    """One of an agent's knowledge documents, as listed (no content)."""

    document_id: str
    title: str | None = None
    chunk_count: int
    size: int
    created_at: datetime


class KnowledgeDeleted(_Model):
    """What ``delete_knowledge`` answers: the document and how many chunks went with it."""

    document_id: str
    deleted_chunks: int


class EmbedderConfig(_Model):
    """The tenant's embedder: an OpenAI-compatible embeddings endpoint, or the server's
    default (``provider`` 'hash' or 'semantic'). The API key is never returned:
    ``has_api_key`` says whether one is stored."""

    provider: str
    base_url: str | None = None
    model: str
    dim: int
    has_api_key: bool = False
    timeout_seconds: float | None = None
    max_retries: int | None = None
    configured_at: datetime | None = None


class RememberDecision(_Model):
    """One fact ``memory.remember`` decided on: ``event`` ADD, UPDATE, DELETE or NONE, the
    memory's ``key``, the fact's ``value`` (None for a DELETE and for a sensitive statement),
    the ``previous`` value it replaced or removed, and the ``reason``."""

    event: str
    key: str
    value: str | None = None
    previous: str | None = None
    reason: str


class Remembered(_Model):
    """What ``memory.remember`` answers: its decisions in message order, the extractor
    (``builtin-v1`` or ``model-v1``) and model, and whether it was a dry run."""

    decisions: list[RememberDecision]
    extractor: str
    model: str | None = None
    dry_run: bool
