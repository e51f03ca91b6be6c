"""memplane: the Python SDK for the memplane memory service.

>>> with memplane.Client("https://memplane.example.com", api_key) as client:  # doctest: +SKIP
...     client.memory.set(scope="user", scope_ref="u1", key="prefs", value={"tone": "brief"})
...     client.memory.get(scope="user", scope_ref="u1", key="prefs").value
{'tone': 'brief'}

The exceptions are drawn as a tree in ``memplane._exceptions``.
"""

import typing

from ._version import __version__

if typing.TYPE_CHECKING:
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
    from ._dlp import DlpPolicy
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
        SensitiveData,
        ServerError,
        StorageUnavailable,
        SubjectErasureInProgress,
        TransportError,
        Unauthorized,
    )
    from ._hygiene import CleanupItem, CleanupResult, LegalHold, RetentionPolicy
    from ._models import (
        ApiKey,
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
        RememberDecision,
        Remembered,
        SearchResult,
        SearchResults,
        StorageConfig,
        StorageHealth,
        SummarizerConfig,
        Tenant,
    )
    from ._team_calls import Team

# The names are imported when first used (PEP 562): ``import memplane`` stays cheap for the
# command line's server and local commands, which never need the HTTP client or its models.
_NAMES = {
    "_async_client": ("AsyncClient",),
    "_batch": ("BatchResult",),
    "_client": ("Client",),
    "_compliance": ("Job", "Receipt"),
    "_config_calls": ("Agent",),
    "_dlp": ("DlpPolicy",),
    "_team_calls": ("Team",),
    "_conversations": (
        "ContextItem", "ContextSection", "ContextWindow", "Conversation", "Message",
        "MessageAdded",
    ),
    "_exceptions": (
        "APIError", "BadRequest", "Conflict", "Forbidden", "HashMismatch", "InvalidResponse",
        "MemplaneError", "NotFound", "PayloadTooLarge", "SensitiveData", "ServerError",
        "StorageUnavailable", "SubjectErasureInProgress", "TransportError", "Unauthorized",
    ),
    "_hygiene": ("CleanupItem", "CleanupResult", "LegalHold", "RetentionPolicy"),
    "_models": (
        "ApiKey", "AuditEntry", "AuditVerification", "CompactorConfig", "CreatedKey",
        "CreatedTenant", "Entry", "Event", "EventWithBody", "Memory", "Page", "Pointer",
        "Provenance", "ProvenanceEvent", "SearchResult", "SearchResults", "StorageConfig",
        "StorageHealth", "SummarizerConfig", "Tenant", "RememberDecision", "Remembered",
    ),
}
_LAZY = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memplane' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "APIError",
    "Agent",
    "ApiKey",
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
    "DlpPolicy",
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
    "RememberDecision",
    "Remembered",
    "RetentionPolicy",
    "SearchResult",
    "SearchResults",
    "SensitiveData",
    "ServerError",
    "StorageConfig",
    "StorageHealth",
    "StorageUnavailable",
    "SummarizerConfig",
    "SubjectErasureInProgress",
    "Team",
    "Tenant",
    "TransportError",
    "Unauthorized",
    "__version__",
]
