"""Every table of the control plane. Metadata only: no memory content lives here (I7).

Each module holds one domain's tables; importing this package registers them all with
``Base.metadata`` (what Alembic compares the migrations against) and exposes every model.
"""

from .audit import AccessLog, AuditHead, AuditTile
from .compliance import ErasureReceipt, LegalHold, RetentionPolicy, SubjectErasure
from .conversations import Conversation, ConversationMessage
from .dlp import DlpPolicy
from .idempotency import IdempotentResponse
from .jobs import Job
from .keys import KekVersion, SubjectKey
from .memories import (
    VECTOR_SUFFIX,
    WANTS_VECTOR,
    Compaction,
    CompactionEvent,
    EntryTerm,
    GcCandidate,
    MemoryEvent,
    MemoryPointer,
    SearchSegment,
)
from .teams import Team, TeamMember
from .tenant_settings import (
    AgentSettings,
    CompactorSettings,
    EmbedderConfig,
    ModelRoute,
    SummarizerConfig,
)
from .tenants import ApiKey, StorageConfig, Tenant
from .witnesses import AuditWitness

__all__ = [
    "VECTOR_SUFFIX",
    "WANTS_VECTOR",
    "AccessLog",
    "AgentSettings",
    "ApiKey",
    "AuditHead",
    "AuditTile",
    "AuditWitness",
    "Compaction",
    "CompactionEvent",
    "CompactorSettings",
    "Conversation",
    "ConversationMessage",
    "DlpPolicy",
    "EmbedderConfig",
    "EntryTerm",
    "ErasureReceipt",
    "GcCandidate",
    "IdempotentResponse",
    "Job",
    "KekVersion",
    "LegalHold",
    "MemoryEvent",
    "MemoryPointer",
    "RetentionPolicy",
    "SearchSegment",
    "StorageConfig",
    "SubjectErasure",
    "SubjectKey",
    "SummarizerConfig",
    "ModelRoute",
    "Team",
    "TeamMember",
    "Tenant",
]
