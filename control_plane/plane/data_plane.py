"""The data plane as the services see it: which adapter and prefix hold a tenant's content.

Adapters are built once per storage configuration and shared by all request threads. The
server's default bucket is one adapter shared by every tenant, each confined to
``tenants/<tenant id>``; a tenant's own bucket gets an adapter rooted at its effective prefix
``<prefix or "memplane">/<tenant id>``, so the health probe, listings, GC and erasure stay
inside it and two tenants sharing one bucket never share an object. Credentials are
decrypted only here, when an adapter is built.

Only the operator's default bucket may use the server's own credential chain
(``allow_ambient_credentials``); a tenant's adapter is built with the tenant's credentials
(or a role assumed with ExternalId = the tenant id) and the endpoint guard of
``MEMPLANE_ALLOWED_ENDPOINTS`` (storage_adapters/netguard.py).

Which configuration is *active* is cached per tenant for a few seconds: a change made through
this process forgets it at once; other replicas follow when the entry expires.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.identity import IdentityRefused, ImpersonationRules
from storage_adapters.netguard import EndpointPolicy
from storage_adapters.registry import from_config, from_url

from .. import host_board
from ..db.models import AgentSettings, StorageConfig
from ..errors import (
    Conflict,
    HashMismatch,
    InvalidInput,
    NotFound,
    StorageMisconfigured,
    StorageUnavailable,
)
from .bulkhead import BulkheadedAdapter, Bulkheads, StorageBusy
from .credentials import CredentialBox, CredentialsUnreadable, associated_data

if TYPE_CHECKING:
    from ..observability.metrics import Metrics
    from .keyring import Keyring

DEFAULT = "default"
DEFAULT_PREFIX = "memplane"
ACTIVE_TTL_SECONDS = 5.0
# Each tenant's own buckets: calls at once, threads waiting, longest wait (bulkhead.py);
# Runtime sets MEMPLANE_STORAGE_CALLS_PER_TENANT and friends.
BULKHEAD_CALLS, BULKHEAD_WAITERS, BULKHEAD_WAIT_SECONDS = 8, 8, 2.0


class UserMemoryDisabled(Conflict):
    code = "user_memory_disabled"


@dataclass(frozen=True)
class AgentRoute:
    """An agent's user-memory settings as the write path needs them."""

    enabled: bool
    config_id: uuid.UUID | None


AGENT_CACHE_SIZE = 100_000


@dataclass(frozen=True)
class Target:
    config_id: uuid.UUID
    prefix: str
    adapter: storage.StorageAdapter
    # The bucket keeps old versions (S3 versioning), as recorded on the configuration row.
    versioned: bool = False

    def path(self, *segments: str) -> str:
        return "/".join(s for s in (self.prefix, *segments) if s)

    def delete(self, paths: list[str]) -> None:
        """Remove these objects for good.

        On a versioned bucket a plain delete only adds a delete marker, so every version and
        marker of each path is purged instead. Object paths end in a unique
        ``<version id>.json``, so a path used as a listing prefix matches only that object.
        """
        if not paths:
            return
        if self.versioned:
            storage.purge_paths(self.adapter, paths)
        else:
            self.adapter.delete_many(paths)


class AuditRecorder(Protocol):
    """Group commit for the audit rows of reads, as the services use it (the audit domain's
    ``AuditBatcher``, control_plane/audit/batcher.py)."""

    def record(self, tenant_id: object, accessor_type: str, accessor_id: str, operation: str,
               *, pointer_id: object = None, detail: str = "", timeout: float = 30,
               agent_id: str | None = None) -> None: ...

    def record_many(self, tenant_id: object, accessor_type: str, accessor_id: str,
                    operation: str, rows: list[tuple[object, str]], *,
                    agent_id: str | None = None) -> None: ...

    def record_operations(self, tenant_id: object, accessor_type: str, accessor_id: str,
                          rows: Sequence[tuple[str, object, str]], *,
                          agent_id: str | None = None) -> None: ...

    def close(self) -> None: ...


class SubjectKeys(Protocol):
    """Subject keys by id, for what was sealed under one outside the bucket: the audit log's
    sealed details (the keys domain's ``SubjectKeyOpener``, control_plane/keys)."""

    def unwrapped(self, session: Session, tenant_id: uuid.UUID,
                  key_id: uuid.UUID) -> bytes | None:
        """The tenant's subject key ``key_id``, unwrapped; None if the tenant has no such key
        or it was destroyed. Raises ``KeyServiceUnavailable`` if it cannot be unwrapped now."""
        ...


def no_faults(_step: str) -> None:
    return None


class DataPlane:
    def __init__(self, default_bucket_url: str,
                 checkpoint: Callable[[str], None] = no_faults, *,
                 credentials: CredentialBox | None = None,
                 active_ttl_seconds: float = ACTIVE_TTL_SECONDS,
                 allowed_endpoints: Sequence[str] = (),
                 impersonation_allowed: Sequence[str] = (),
                 clock: Callable[[], float] = time.monotonic,
                 board: host_board.Board | None = None) -> None:
        self._default_url = default_bucket_url
        # The operator's allow-list; each backend adds its own storage endpoints to it
        # (storage_adapters/registry.py).
        self.endpoint_policy = EndpointPolicy.from_entries(allowed_endpoints)
        # Which Google service accounts each tenant may have the server impersonate
        # (MEMPLANE_GCS_IMPERSONATION_ALLOWED).
        self.impersonation = ImpersonationRules.from_entries(impersonation_allowed)
        self._default: storage.StorageAdapter | None = None
        self.credentials = credentials
        # Configuration rows are immutable, so their targets can be kept for good.
        self._targets: dict[uuid.UUID, Target] = {}
        # tenant -> (active configuration, ``clock`` time the entry expires)
        self._active: dict[uuid.UUID, tuple[uuid.UUID, float, int]] = {}
        self._active_ttl = active_ttl_seconds
        # tenant (or tenant and agent) -> how often its active configuration (its agent's
        # route) was forgotten: a lookup that began before the latest forget may have read
        # the old one, and must not put it back in the cache after the forget. One int per
        # tenant or agent ever reconfigured in this process.
        self._forgotten: dict[Any, int] = {}
        # (tenant, agent id) -> (its user-memory route or None, ``clock`` time it expires):
        # a memory write asks this instead of the database (control_plane/agents).
        self._agents: dict[tuple[uuid.UUID, str], tuple[AgentRoute | None, float, int]] = {}
        # Monotonic seconds; tests pass their own clock and move it instead of sleeping.
        self._clock = clock
        # The change counters of this host's processes (host_board): a reconfiguration
        # through any of them makes every process's cached entries stale at once.
        self._board = board or host_board.current()
        self._lock = threading.Lock()
        # Crash tests replace this to stop a protocol between two of its steps.
        self.checkpoint = checkpoint
        # Encryption keys of the running control plane (control_plane/keys), set by Runtime.
        self.keys: Keyring | None = None
        # Opens the subject keys audit details are sealed under (control_plane/keys), set by
        # Runtime.
        self.subject_keys: SubjectKeys | None = None
        # Group commit for the audit rows of reads (control_plane/audit/batcher.py), set by
        # Runtime; without it each read commits its own row.
        self.audit_batcher: AuditRecorder | None = None
        # Largest serialised value one memory may hold (MEMPLANE_MAX_OBJECT_BYTES), set by Runtime.
        self.max_object_bytes: int | None = None
        # How long one call to a bucket may take in all (storage_adapters/bounded).
        self.call_deadline: float | None = None
        # Storage call latency and errors per backend (observability/metrics.py), set by the app.
        self.metrics: Metrics | None = None
        # Bounds each tenant's calls to its own buckets (bulkhead.py), set by Runtime.
        self.bulkheads = Bulkheads(BULKHEAD_CALLS, BULKHEAD_WAITERS, BULKHEAD_WAIT_SECONDS)

    @property
    def default_adapter(self) -> storage.StorageAdapter:
        with self._lock:
            if self._default is None:
                # The operator's own bucket: the one place the server's credentials serve.
                self._default = self._instrumented(
                    from_url(self._default_url, allow_ambient_credentials=True,
                             call_deadline=self.call_deadline))
            return self._default

    def active(self, session: Session, tenant_id: uuid.UUID) -> Target:
        """Where new content of the tenant goes."""
        now = self._clock()
        cached = self._active.get(tenant_id)
        stamp = self._board.generation(host_board.STORAGE)  # changes on this host: at once
        if cached is not None and cached[1] > now and cached[2] == stamp:
            return self.by_id(session, cached[0])
        with self._lock:
            forgotten = self._forgotten.get(tenant_id, 0)
        bind = session.get_bind()
        if bind.dialect.name == "sqlite" and session.in_transaction():
            # SQLite reads a whole transaction from one snapshot, which may predate the
            # latest reconfiguration and its forget: cached, the old bucket would get the
            # tenant's writes for the whole TTL. A session of its own reads after the forget
            # count was taken.
            with Session(bind) as fresh:
                return self._look_up_active(fresh, tenant_id, forgotten, now, stamp)
        return self._look_up_active(session, tenant_id, forgotten, now, stamp)

    def _look_up_active(self, session: Session, tenant_id: uuid.UUID, forgotten: int,
                        now: float, stamp: int) -> Target:
        config_id = session.scalar(
            select(StorageConfig.id)
            .where(StorageConfig.tenant_id == tenant_id, StorageConfig.is_active)
            .order_by(StorageConfig.created_at.desc()).limit(1)
        )
        if config_id is None:
            raise StorageMisconfigured("the tenant has no storage configuration")
        with self._lock:
            if self._forgotten.get(tenant_id, 0) == forgotten:  # no reconfiguration since
                self._active[tenant_id] = (config_id, now + self._active_ttl, stamp)
        return self.by_id(session, config_id)

    def for_memory(self, session: Session, tenant_id: uuid.UUID, scope: str,
                   agent_id: str | None, user_id: str | None) -> Target:
        """Where a new memory version goes: an agent's user memories (scope ``user``, or
        written with a ``user_id``) go to the storage its settings name, else the default.
        A user memory the agent has disabled is refused."""
        if agent_id is not None and (scope == "user" or user_id is not None):
            route = self.agent_route(session, tenant_id, agent_id)
            if route is not None and not route.enabled:
                raise UserMemoryDisabled(
                    f"user memory is disabled for agent {agent_id!r}, so it may not write "
                    "user memories; an admin can enable it (PUT /v1/agents/{agent_id} with "
                    "memory.user_memory.enabled = true), or write without a user")
            if route is not None and route.config_id is not None:
                return self.by_id(session, route.config_id)
        return self.active(session, tenant_id)

    def agent_route(self, session: Session, tenant_id: uuid.UUID,
                    agent_id: str) -> AgentRoute | None:
        """The agent's user-memory settings, cached like the active configuration."""
        now = self._clock()
        cached = self._agents.get((tenant_id, agent_id))
        stamp = self._board.generation(host_board.AGENTS)
        if cached is not None and cached[1] > now and cached[2] == stamp:
            return cached[0]
        with self._lock:
            forgotten = self._forgotten.get((tenant_id, agent_id), 0)
        row = session.execute(
            select(AgentSettings.user_memory_enabled,
                   AgentSettings.user_memory_storage_config_id)
            .where(AgentSettings.tenant_id == tenant_id, AgentSettings.agent_id == agent_id)
        ).first()
        route = None if row is None else AgentRoute(bool(row[0]), row[1])
        with self._lock:
            if self._forgotten.get((tenant_id, agent_id), 0) == forgotten:
                if len(self._agents) >= AGENT_CACHE_SIZE:
                    self._agents.clear()
                self._agents[(tenant_id, agent_id)] = (route, now + self._active_ttl, stamp)
        return route

    def forget_agent(self, tenant_id: uuid.UUID, agent_id: str) -> None:
        """The agent's settings changed (call after the change committed)."""
        self._board.bump(host_board.AGENTS)
        with self._lock:
            key = (tenant_id, agent_id)
            self._forgotten[key] = self._forgotten.get(key, 0) + 1
            self._agents.pop(key, None)

    def by_id(self, session: Session, config_id: uuid.UUID) -> Target:
        """Where content written under one (possibly older) configuration lives."""
        target = self._targets.get(config_id)
        if target is not None:
            return target
        config = session.get(StorageConfig, config_id)
        if config is None:
            raise NotFound("storage configuration not found")
        if config.storage_type == DEFAULT:
            target = Target(config.id, config.prefix, self.default_adapter)
        else:
            target = Target(config.id, "", self.guarded(config.tenant_id, self._adapter(config)),
                            versioned=bool(config.versioning))
        with self._lock:
            kept = self._targets.setdefault(config_id, target)
        if kept is not target and target.adapter is not self._default:
            target.adapter.close()  # another thread built it first
        return kept

    def guarded(self, tenant_id: uuid.UUID,
                adapter: storage.StorageAdapter) -> storage.StorageAdapter:
        """A tenant's own adapter, instrumented and inside the tenant's bulkhead (the
        operator's default bucket has none; see bulkhead.py)."""
        from ..observability.instrumented_storage import backend_name

        backend = backend_name(adapter)

        def refused() -> None:
            if self.metrics is not None:
                self.metrics.storage_refused.labels(backend).inc()

        return BulkheadedAdapter(self._instrumented(adapter),  # type: ignore[return-value]
                                 self.bulkheads.of(tenant_id), refused)

    def _instrumented(self, adapter: storage.StorageAdapter) -> storage.StorageAdapter:
        if self.metrics is None:
            return adapter
        from ..observability.instrumented_storage import InstrumentedAdapter, backend_name

        return InstrumentedAdapter(adapter, backend_name(adapter), self.metrics)  # type: ignore[return-value]

    def forget_tenant(self, tenant_id: uuid.UUID) -> None:
        """The tenant's active configuration changed (call after the change committed)."""
        self._board.bump(host_board.STORAGE)
        with self._lock:
            self._forgotten[tenant_id] = self._forgotten.get(tenant_id, 0) + 1
            self._active.pop(tenant_id, None)

    def _adapter(self, config: StorageConfig) -> storage.StorageAdapter:
        secrets: dict[str, str] = {}
        if config.credentials_encrypted is not None:
            if self.credentials is None:
                raise StorageMisconfigured("the server has no key to decrypt bucket credentials")
            try:
                secrets = self.credentials.open(
                    config.credentials_encrypted,
                    aad=associated_data(config.tenant_id, config.id))
            except CredentialsUnreadable:
                raise StorageMisconfigured(
                    "the stored bucket credentials do not decrypt with this server's key; "
                    "restore the server key or configure the storage again"
                ) from None
        try:
            return build_adapter(config.storage_type, config.connection_config, secrets,
                                 config.prefix, tenant_id=config.tenant_id,
                                 endpoint_policy=self.endpoint_policy,
                                 call_deadline=self.call_deadline,
                                 impersonation=self.impersonation)
        except storage.EndpointRefused:
            raise StorageMisconfigured(
                "the configured storage endpoint is not allowed on this server any more; an "
                "admin must configure the storage again", problem="endpoint_not_allowed"
            ) from None
        except IdentityRefused as exc:
            raise StorageMisconfigured(
                f"the stored storage configuration is no longer accepted ({exc}); an admin "
                "must configure the storage again", problem="impersonation_not_allowed"
            ) from None
        except ValueError:
            raise StorageMisconfigured(
                "the stored storage configuration is no longer accepted (it has no "
                "credentials of its own); an admin must configure the storage again"
            ) from None

    def close(self) -> None:
        with self._lock:
            for target in self._targets.values():
                if target.adapter is not self._default:
                    target.adapter.close()
            if self._default is not None:
                self._default.close()
            self._targets.clear()
            self._default = None


PUBLIC_ID_PREFIX = "sc_"


def public_id(config_id: uuid.UUID) -> str:
    """A configuration's public id, ``sc_<32 hex digits>``."""
    return f"{PUBLIC_ID_PREFIX}{config_id.hex}"


def parse_public_id(value: str) -> uuid.UUID:
    """The configuration id behind ``sc_…``; a malformed one is the caller's 422."""
    if value.startswith(PUBLIC_ID_PREFIX):
        try:
            return uuid.UUID(hex=value[len(PUBLIC_ID_PREFIX):])
        except ValueError:
            pass
    raise InvalidInput(f"{value!r} is not a storage config id: they look like 'sc_' followed "
                       "by 32 hex digits (see GET /v1/storage/configs)",
                       problem="bad_storage_config_id")


def object_prefix(user_prefix: str | None, tenant_id: uuid.UUID) -> str:
    """Where a tenant's objects go in its own bucket, always confined to the tenant's id.

    A prefix naming another tenant's id would put this tenant's tree inside that tenant's
    (``memplane/<other>/<this>``), so any segment that is a tenant id other than the caller's
    own is refused — any UUID at all, so the answer tells nothing about which ids exist.
    """
    for segment in (user_prefix or "").split("/"):
        try:
            named = uuid.UUID(segment)
        except ValueError:
            continue
        if named != tenant_id:
            raise InvalidInput(
                f"prefix segment {segment!r} looks like another tenant's id; a prefix must not "
                "contain a tenant id other than your own — choose a prefix without it",
                problem="prefix_not_allowed")
    return f"{user_prefix or DEFAULT_PREFIX}/{tenant_id}"


def build_adapter(storage_type: str, public: Mapping[str, Any], secrets: Mapping[str, str],
                  prefix: str, *, tenant_id: uuid.UUID, endpoint_policy: EndpointPolicy,
                  call_deadline: float | None = None,
                  impersonation: ImpersonationRules | None = None) -> storage.StorageAdapter:
    """A tenant's adapter rooted at ``prefix`` inside the configured bucket (or directory).

    It has only the tenant's own credentials (an S3 role is assumed with ExternalId = the
    tenant id; a Google account is impersonated only if ``impersonation`` binds it to the
    tenant, by default none is) and its connections are guarded by ``endpoint_policy``.
    """
    (impersonation or ImpersonationRules()).check(tenant_id, storage_type, public)
    settings: dict[str, Any] = {**public, **secrets}
    if storage_type == "local":
        settings = {"root": str(Path(settings["root"]) / prefix)}
    else:
        settings["prefix"] = prefix
        settings["external_id"] = str(tenant_id)
    return from_config(storage_type, settings, allow_ambient_credentials=False,
                       endpoint_policy=endpoint_policy, call_deadline=call_deadline)


def default_config(tenant_id: uuid.UUID) -> StorageConfig:
    """The server's own bucket, each tenant confined to its own prefix."""
    return StorageConfig(tenant_id=tenant_id, storage_type=DEFAULT,
                         prefix=f"tenants/{tenant_id}", connection_config={})


@contextmanager
def storage_errors(pointer_id: uuid.UUID | None = None) -> Iterator[None]:
    """Map the adapters' error tree to API errors, in one place."""
    try:
        yield
    except StorageBusy:
        raise  # already the API's 503, with its own sentence
    except storage.StorageUnavailable as exc:
        raise StorageUnavailable(
            "the tenant's bucket is unreachable right now; retry later"
        ) from exc
    except storage.StorageAuthError as exc:
        raise StorageMisconfigured(
            "the tenant's bucket rejected the configured credentials; an admin must update "
            "the storage configuration"
        ) from exc
    except storage.InvalidPath as exc:
        raise InvalidInput(f"the object path is not valid for this bucket: {exc}") from exc
    except storage.IntegrityError as exc:
        raise HashMismatch(
            "the stored object failed the bucket's own checksum",
            pointer_id=str(pointer_id) if pointer_id else None,
        ) from exc
