"""memplane: the Python SDK for the memplane memory service.

>>> with memplane.Client("https://memplane.example.com", api_key) as client:  # doctest: +SKIP
...     client.memory.set(scope="user", scope_ref="u1", key="prefs", value={"tone": "brief"})
...     client.memory.get(scope="user", scope_ref="u1", key="prefs").value
{'tone': 'brief'}

The exceptions are drawn as a tree in ``memplane._exceptions``.
"""

from ._async_client import AsyncClient
from ._batch import BatchResult
from ._client import Client
from ._compliance import Job, Receipt
from ._config_calls import Agent
from ._conversations import (
    ContextItem,
    ContextSection,
    ContextWindow,
    Conversation,
    Message,
    MessageAdded,
)
from ._exceptions import (
    APIError,
    BadRequest,
    Conflict,
    Forbidden,
    HashMismatch,
    InvalidResponse,
    MemplaneError,
    NotFound,
    PayloadTooLarge,
    ServerError,
    StorageUnavailable,
    SubjectErasureInProgress,
    TransportError,
    Unauthorized,
)
from ._hygiene import CleanupItem, CleanupResult, LegalHold, RetentionPolicy
from ._models import (
    AuditEntry,
    AuditVerification,
    CompactorConfig,
    CreatedKey,
    CreatedTenant,
    Entry,
    Event,
    EventWithBody,
    Memory,
    Page,
    Pointer,
    Provenance,
    ProvenanceEvent,
    SearchResult,
    SearchResults,
    StorageConfig,
    StorageHealth,
    SummarizerConfig,
    Tenant,
)
from ._version import __version__

__all__ = [
    "APIError",
    "Agent",
    "AsyncClient",
    "AuditEntry",
    "AuditVerification",
    "BadRequest",
    "BatchResult",
    "CleanupItem",
    "CleanupResult",
    "Client",
    "CompactorConfig",
    "Conflict",
    "ContextItem",
    "ContextSection",
    "ContextWindow",
    "Conversation",
    "CreatedKey",
    "CreatedTenant",
    "Entry",
    "Event",
    "EventWithBody",
    "Forbidden",
    "HashMismatch",
    "InvalidResponse",
    "Job",
    "LegalHold",
    "Memory",
    "MemplaneError",
    "Message",
    "MessageAdded",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "Pointer",
    "Provenance",
    "ProvenanceEvent",
    "Receipt",
    "RetentionPolicy",
    "SearchResult",
    "SearchResults",
    "ServerError",
    "StorageConfig",
    "StorageHealth",
    "StorageUnavailable",
    "SummarizerConfig",
    "SubjectErasureInProgress",
    "Tenant",
    "TransportError",
    "Unauthorized",
    "__version__",
]
