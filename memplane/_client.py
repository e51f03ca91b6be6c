"""GENERATED from _async_client.py by scripts/unasync.py: do not edit.

Edit _async_client.py and run ``python scripts/unasync.py``; a test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _base, _batch, _compliance
from . import _hygiene as hygiene
from ._admin_sync import (
    AuditAPI,
    KeysAPI,
    StorageAPI,
    TeamsAPI,
    TenantsAPI,
)
from ._base import Call, ClientConfig
from ._batch import BatchResult
from ._compliance import Job
from ._compliance_sync import ExportsAPI, JobsAPI, ReceiptsAPI
from ._content_sync import (
    ConversationsAPI,
    EntriesAPI,
    EventsAPI,
    KnowledgeAPI,
    MemorySearchAPI,
)
from ._dlp_sync import DlpAPI
from ._exceptions import TransportError
from ._governance_sync import (
    AgentsAPI,
    CompactorAPI,
    EmbedderAPI,
    LegalHoldsAPI,
    ModelRoutesAPI,
    RetentionAPI,
    SummarizerAPI,
)
from ._hygiene import CleanupResult, RetentionPolicy, parse_days
from ._models import (
    Memory,
    Page,
    Pointer,
    Remembered,
)
from ._namespace_sync import _Namespace
from ._remember import remember_call

__all__ = [
    "AuditAPI",
    "Client",
    "KeysAPI",
    "MemoryAPI",
    "StorageAPI",
    "TenantsAPI",
]

T = TypeVar("T")


class Client:
    """A synchronous memplane client.

    ``base_url`` is the server root (``https://memplane.example.com``); ``api_key`` is sent
    as a bearer token and decides the tenant. Pass ``http_client`` to reuse a configured
    ``httpx.Client`` (the caller then owns and closes it), or ``transport`` to swap the
    network layer, e.g. ``httpx.MockTransport`` in tests. Use it in an ``with`` block
    or call ``close()``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout = 30.0,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if http_client is not None and transport is not None:
            raise ValueError("pass either http_client or transport, not both")
        self._config = ClientConfig(base_url, api_key)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(transport=transport, timeout=timeout)
        self.memory = MemoryAPI(self)
        self.audit = AuditAPI(self)
        self.keys = KeysAPI(self)
        self.tenants = TenantsAPI(self)
        self.jobs = JobsAPI(self)
        self.exports = ExportsAPI(self)
        self.receipts = ReceiptsAPI(self)
        self.storage = StorageAPI(self)
        self.agents = AgentsAPI(self)
        self.teams = TeamsAPI(self)
        self.events = EventsAPI(self)
        self.entries = EntriesAPI(self)
        self.compactor = CompactorAPI(self)
        self.summarizer = SummarizerAPI(self)
        self.model_routes = ModelRoutesAPI(self)
        self.embedder = EmbedderAPI(self)
        self.conversations = ConversationsAPI(self)
        self.retention = RetentionAPI(self)
        self.legal_holds = LegalHoldsAPI(self)
        self.dlp = DlpAPI(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._config.base_url!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the underlying ``httpx.Client``, unless the caller passed it in."""
        if self._owns_http:
            self._http.close()

    def health(self) -> bool:
        """Whether the server process answers ``/healthz``; False when unreachable."""
        return self._probe("/healthz")

    def ready(self) -> bool:
        """Whether the server can serve requests (``/readyz``: its database is reachable)."""
        return self._probe("/readyz")

    def _probe(self, path: str) -> bool:
        try:
            return self._send(_base.probe(path))
        except TransportError:
            return False

    def _send(self, call: Call[T]) -> T:
        request = self._config.build_request(self._http, call)
        try:
            response = self._http.send(request)
        except httpx.RequestError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        return _base.handle_response(call, response)

    def _iterate(self, page_call: Callable[[str | None], Call[Page[T]]]) -> Iterator[T]:
        cursor: str | None = None
        while True:
            page = self._send(page_call(cursor))
            for item in page.items:  # noqa: UP028 (generated into the sync client too)
                yield item
            cursor = page.next_cursor
            if cursor is None:
                return


class MemoryAPI(MemorySearchAPI, KnowledgeAPI, _Namespace):
    """Memories addressed by ``(scope, scope_ref, key)``; reached as ``client.memory``.

    ``scope_ref`` may be omitted for the ``tenant`` and ``institutional`` scopes, and, as
    the seed writes it, given as ``user_id`` for scope ``user``, ``agent_id`` for ``agent``
    and ``team_id`` for ``team`` (``team_id`` alone means scope ``team``): ``set(scope='user',
    user_id='u-1', …)``. A ``scope_ref`` contradicting them raises ``ValueError``.
    """

    def set(
        self,
        *,
        key: str,
        value: Any,
        scope: str | None = None,
        scope_ref: str | None = None,
        team_id: str | None = None,
        memory_type: str | None = None,
        tags: list[str] | None = None,
        importance: int | None = None,
        title: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        ttl_days: int | None = None,
        searchable: bool | None = None,
        idempotency_key: str | None = None,
    ) -> Pointer:
        """Store ``value`` (any JSON) under the key, replacing what was there.

        Metadata left as None is not sent (a rewrite keeps it). ``searchable=False``: never
        embedded, never found by search (machine state). A retry with the same
        ``idempotency_key`` returns the first answer instead of writing again.
        """
        scope, scope_ref = _base.seed_scope(scope, scope_ref, user_id=user_id,
                                            agent_id=agent_id, team_id=team_id)
        metadata = dict(
            memory_type=memory_type,
            tags=tags,
            importance=importance,
            title=title,
            user_id=user_id,
            agent_id=agent_id,
            ttl_days=ttl_days,
            searchable=searchable,
        )
        return self._client._send(
            _base.memory_set(
                scope=scope,
                scope_ref=scope_ref,
                key=key,
                value=value,
                metadata=metadata,
                idempotency_key=idempotency_key,
            )
        )

    def get(self, *, key: str, scope: str | None = None, scope_ref: str | None = None,
                  user_id: str | None = None, agent_id: str | None = None,
                  team_id: str | None = None) -> Memory:
        """Read the value and pointer under the key; raises ``NotFound`` if absent."""
        scope, scope_ref = _base.seed_scope(scope, scope_ref, user_id=user_id,
                                            agent_id=agent_id, team_id=team_id)
        return self._client._send(_base.memory_get(scope=scope, scope_ref=scope_ref, key=key))

    def append(
        self,
        *,
        key: str,
        value: Any,
        scope: str | None = None,
        scope_ref: str | None = None,
        team_id: str | None = None,
        memory_type: str | None = None,
        tags: list[str] | None = None,
        importance: int | None = None,
        title: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        ttl_days: int | None = None,
        idempotency_key: str | None = None,
    ) -> Pointer:
        """Append ``value`` to the JSON list stored under the key, creating the list if absent."""
        scope, scope_ref = _base.seed_scope(scope, scope_ref, user_id=user_id,
                                            agent_id=agent_id, team_id=team_id)
        metadata = dict(
            memory_type=memory_type,
            tags=tags,
            importance=importance,
            title=title,
            user_id=user_id,
            agent_id=agent_id,
            ttl_days=ttl_days,
        )
        return self._client._send(
            _base.memory_append(
                scope=scope,
                scope_ref=scope_ref,
                key=key,
                value=value,
                metadata=metadata,
                idempotency_key=idempotency_key,
            )
        )

    def delete(self, *, key: str, scope: str | None = None,
                     scope_ref: str | None = None, user_id: str | None = None,
                     agent_id: str | None = None, team_id: str | None = None) -> None:
        """Delete the memory under the key; raises ``NotFound`` if absent."""
        scope, scope_ref = _base.seed_scope(scope, scope_ref, user_id=user_id,
                                            agent_id=agent_id, team_id=team_id)
        self._client._send(_base.memory_delete(scope=scope, scope_ref=scope_ref, key=key))

    def set_many(
        self, items: Iterable[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> list[BatchResult]:
        """Store many memories in few requests (``POST /v1/memories:batch``, 1,000 a request).

        Each item is a mapping with ``scope``, ``scope_ref`` (optional for tenant scope),
        ``key``, ``value`` and any metadata ``set`` takes. Returns one ``BatchResult`` per
        item, in order; a failed item does not raise (see ``BatchResult.raise_for_error``).
        Items on one key apply in the order given.
        """
        results: list[BatchResult] = []
        for call in _batch.calls(_batch.operations("set", items), idempotency_key):
            chunk: list[BatchResult] = self._client._send(call)
            results.extend(chunk)
        return results

    def get_many(
        self, items: Iterable[Mapping[str, Any] | Sequence[Any]]
    ) -> list[BatchResult]:
        """Read many memories in few requests; each item is a mapping with ``scope``,
        ``scope_ref``, ``key`` or a ``(scope, scope_ref, key)`` tuple. Returns one
        ``BatchResult`` per item, in order (``value`` and ``pointer`` when ``ok``; a missing
        memory is a 404 result, not an exception)."""
        results: list[BatchResult] = []
        for call in _batch.calls(_batch.operations("get", items), None):
            chunk: list[BatchResult] = self._client._send(call)
            results.extend(chunk)
        return results

    def cleanup(self, *, older_than: str | int | None = None,
                      older_than_days: int | None = None, agent_id: str | None = None,
                      scope: str | None = None, scope_ref: str | None = None,
                      exclude_keys: Sequence[str] | None = None,
                      dry_run: bool = False,
                      keep_importance_at_least: int | None = None) -> CleanupResult | Job:
        """Delete the memories by key last written ``older_than`` ago or more (``'180d'``,
        ``180``, ``'26w'``; or ``older_than_days``), of one agent and/or scope, except
        ``exclude_keys``, held ones and (``keep_importance_at_least``, 1-5) those of that
        importance or more. Returns the counts (a dry run also lists what would
        go), or the ``Job`` it became when more than 1,000 memories would go."""
        if (older_than is None) == (older_than_days is None):
            raise ValueError("give older_than (such as '180d') or older_than_days, not both")
        days = older_than_days if older_than_days is not None else parse_days(older_than or 0)
        return self._client._send(hygiene.cleanup(
            scope=scope, scope_ref=scope_ref, agent_id=agent_id, older_than_days=days,
            exclude_keys=exclude_keys, dry_run=dry_run,
            keep_importance_at_least=keep_importance_at_least))

    def set_retention_policy(self, *, scope: str, retention_days: int,
                                   auto_delete: bool, memory_type: str | None = None,
                                   archive_after_days: int | None = None
                                   ) -> RetentionPolicy:
        """The seed's ``memory.setRetentionPolicy``: ``client.retention.set_policy``."""
        return self._client._send(hygiene.retention_put(
            scope=scope, retention_days=retention_days, auto_delete=auto_delete,
            memory_type=memory_type, archive_after_days=archive_after_days))

    def clear(self, *, scope: str | None = None, scope_ref: str | None = None,
                    user_id: str | None = None, agent_id: str | None = None,
                    team_id: str | None = None) -> int:
        """Delete every memory in the scope; returns how many were deleted."""
        scope, scope_ref = _base.seed_scope(scope, scope_ref, user_id=user_id,
                                            agent_id=agent_id, team_id=team_id)
        return self._client._send(_base.memory_clear(scope=scope, scope_ref=scope_ref))

    def list_pointers(
        self,
        *,
        scope: str | None = None,
        scope_ref: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        memory_type: str | None = None,
        sync_status: str | None = None,
        tag: str | None = None,
        key_prefix: str | None = None,
        order: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Pointer]:
        """One page of pointers (metadata only) matching the filters. ``key_prefix`` is taken
        literally; ``order``: ``created`` (the default), ``key`` or ``key_desc`` (by key,
        byte by byte; memories by key only) or ``updated_desc`` (by last write, newest
        first)."""
        scope, scope_ref = _base.seed_filter(scope, scope_ref, user_id=user_id,
                                             agent_id=agent_id, team_id=team_id)
        return self._client._send(
            _base.list_pointers(
                scope=scope,
                scope_ref=scope_ref,
                user_id=user_id,
                memory_type=memory_type,
                sync_status=sync_status,
                tag=tag,
                key_prefix=key_prefix,
                order=order,
                limit=limit,
                cursor=cursor,
            )
        )

    def list_memories(
        self,
        *,
        scope: str | None = None,
        scope_ref: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        memory_type: str | None = None,
        tag: str | None = None,
        key_prefix: str | None = None,
        order: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Memory]:
        """One page of memories by key with their values (each read from the bucket, verified
        and audited as a read is; at most 100 a page), filtered as ``list_pointers``; those
        being written or deleted are left out."""
        scope, scope_ref = _base.seed_filter(scope, scope_ref, user_id=user_id,
                                             agent_id=agent_id, team_id=team_id)
        return self._client._send(
            _base.list_memories(
                scope=scope,
                scope_ref=scope_ref,
                user_id=user_id,
                memory_type=memory_type,
                sync_status=None,
                tag=tag,
                key_prefix=key_prefix,
                order=order,
                limit=limit,
                cursor=cursor,
            )
        )

    def iter_pointers(
        self,
        *,
        scope: str | None = None,
        scope_ref: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        team_id: str | None = None,
        memory_type: str | None = None,
        sync_status: str | None = None,
        tag: str | None = None,
        key_prefix: str | None = None,
        order: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Pointer]:
        """Every matching pointer, fetching pages of ``limit`` lazily as iteration goes."""
        scope, scope_ref = _base.seed_filter(scope, scope_ref, user_id=user_id,
                                             agent_id=agent_id, team_id=team_id)
        return self._client._iterate(
            lambda cursor: _base.list_pointers(
                scope=scope,
                scope_ref=scope_ref,
                user_id=user_id,
                memory_type=memory_type,
                sync_status=sync_status,
                tag=tag,
                key_prefix=key_prefix,
                order=order,
                limit=limit,
                cursor=cursor,
            )
        )

    def export(self, *, user_id: str, format: str = "json") -> Job:
        """Start an export of everything stored about ``user_id`` (GDPR Art. 15/20).

        Returns the queued job; wait for it with ``client.jobs.wait(job.id)`` and fetch the
        ZIP with ``client.exports.download(job.id, path)``.
        """
        return self._client._send(_compliance.export_subject(user_id, format))

    def erase_user(self, user_id: str, *, dry_run: bool = False) -> Job:
        """Start the erasure of ``user_id`` (GDPR Art. 17), or with ``dry_run`` only count
        what it would delete. The finished job's ``result["receipt_id"]`` names the signed
        receipt. Safe to repeat: a running erasure of the same subject is returned as is.
        """
        return self._client._send(_compliance.erase_subject(user_id, dry_run))

    def remember(
        self,
        *,
        messages: Iterable[Mapping[str, str]],
        user_id: str,
        agent_id: str | None = None,
        conversation_id: str | None = None,
        scope: str | None = None,
        scope_ref: str | None = None,
        dry_run: bool = False,
    ) -> Remembered:
        """Extract durable facts from the user's ``messages`` (``{"role", "content"}``, oldest
        first) and reconcile them with what is stored about ``user_id``: each decision ADDs,
        UPDATEs (the previous value kept), DELETEs (a retraction) or is NONE. Stored in the
        user's scope unless ``scope`` says otherwise; ``dry_run`` writes nothing. Sensitive
        values are never stored.
        """
        return self._client._send(
            remember_call(
                messages=messages,
                user_id=user_id,
                agent_id=agent_id,
                conversation_id=conversation_id,
                scope=scope,
                scope_ref=scope_ref,
                dry_run=dry_run,
            )
        )
