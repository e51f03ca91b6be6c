"""The memory layer's namespaces for ``AsyncClient``: ``client.events``, ``client.entries``,
``client.compactor``, ``client.summarizer``, ``client.agents``, ``client.conversations``,
``client.retention`` and ``client.legal_holds``, and the named storage configurations of
``client.storage``.

This file is the one written by hand; ``_layer_sync.py`` is generated from it by
``scripts/unasync.py`` (a test fails when the two drift apart), so each method exists once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from . import _config_calls as config_calls
from . import _conversations as conversations
from . import _hygiene as hygiene
from . import _layer_calls as calls
from ._compliance import Job
from ._config_calls import Agent
from ._conversations import ContextWindow, Conversation, Message, MessageAdded
from ._hygiene import LegalHold, RetentionPolicy
from ._models import (
    CompactorConfig,
    EmbedderConfig,
    Entry,
    Event,
    EventWithBody,
    KnowledgeAdded,
    KnowledgeDeleted,
    KnowledgeDocument,
    Page,
    Provenance,
    SearchResults,
    StorageConfig,
    SummarizerConfig,
)
from ._namespace_async import AsyncSender

__all__ = ["AsyncAgentsAPI", "AsyncCompactorAPI", "AsyncConversationsAPI", "AsyncEmbedderAPI",
           "AsyncEntriesAPI", "AsyncEventsAPI", "AsyncKnowledgeAPI", "AsyncLegalHoldsAPI",
           "AsyncMemorySearchAPI", "AsyncRetentionAPI", "AsyncStorageConfigsAPI",
           "AsyncSummarizerAPI"]


class AsyncEventsAPI:
    """The append-only log of raw events; reached as ``client.events``.

    ``scope`` is institutional, entity, project or team (any memory scope is accepted);
    events are never updated or deleted through the API, only by erasure and retention.
    """

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def append(self, scope: str, scope_ref: str, kind: str, body: str, *,
                     source: str | None = None, source_ref: str | None = None,
                     occurred_at: datetime | None = None, user_id: str | None = None,
                     agent_id: str | None = None,
                     idempotency_key: str | None = None) -> Event:
        """Append one event: ``kind`` such as ``call_summary`` or ``decision``, ``body`` in
        Markdown (stored encrypted in the tenant's bucket). ``user_id`` names the data subject
        when there is one, so export and erasure find the event. ``occurred_at`` defaults to
        now on the server. A retry with the same ``idempotency_key`` returns the first answer.
        """
        return await self._client._send(calls.event_append(
            scope=scope, scope_ref=scope_ref, kind=kind, body=body, source=source,
            source_ref=source_ref, occurred_at=occurred_at, user_id=user_id, agent_id=agent_id,
            idempotency_key=idempotency_key))

    async def get(self, event_id: str) -> EventWithBody:
        """The event and its body, verified against its SHA-256; ``NotFound`` if absent."""
        return await self._client._send(calls.event_get(event_id))

    async def list(self, *, scope: str | None = None, scope_ref: str | None = None,
                   kind: str | None = None, since: datetime | None = None,
                   until: datetime | None = None, include_compressed: bool | None = None,
                   limit: int | None = None, cursor: str | None = None) -> Page[Event]:
        """One page of events (metadata, oldest first), filtered by scope, kind and
        ``occurred_at`` range. Events the compactor has summarised are left out unless
        ``include_compressed``. Pass the page's ``next_cursor`` back for the next one."""
        return await self._client._send(calls.event_list(
            scope=scope, scope_ref=scope_ref, kind=kind, since=since, until=until,
            include_compressed=include_compressed, limit=limit, cursor=cursor))

    def iter(self, *, scope: str | None = None, scope_ref: str | None = None,
             kind: str | None = None, since: datetime | None = None,
             until: datetime | None = None, include_compressed: bool | None = None,
             limit: int | None = None) -> AsyncIterator[Event]:
        """Every matching event, fetching pages of ``limit`` lazily as iteration goes."""
        return self._client._iterate(lambda cursor: calls.event_list(
            scope=scope, scope_ref=scope_ref, kind=kind, since=since, until=until,
            include_compressed=include_compressed, limit=limit, cursor=cursor))


class AsyncEntriesAPI:
    """Curated entries addressed by id; reached as ``client.entries``."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def create(self, scope: str, scope_ref: str, title: str, summary: str, *,
                     tags: Sequence[str] | None = None, importance: int | None = None,
                     source: str | None = None, user_id: str | None = None,
                     agent_id: str | None = None,
                     idempotency_key: str | None = None) -> Entry:
        """Create an entry: ``summary`` in Markdown goes (encrypted) to the tenant's bucket;
        title, tags, importance (1 to 5) and source (chat, call, email, manual, api) to the
        control plane. ``source='compactor'`` is the compactor's alone and is refused."""
        return await self._client._send(calls.entry_create(
            scope=scope, scope_ref=scope_ref, title=title, summary=summary, tags=tags,
            importance=importance, source=source, user_id=user_id, agent_id=agent_id,
            idempotency_key=idempotency_key))

    async def get(self, entry_id: str) -> Entry:
        """The entry with its summary, verified against its SHA-256; ``NotFound`` if absent."""
        return await self._client._send(calls.entry_get(entry_id))

    async def update(self, entry_id: str, *, title: str, summary: str,
                     tags: Sequence[str] | None = None, importance: int | None = None,
                     source: str | None = None,
                     idempotency_key: str | None = None) -> Entry:
        """Replace the entry's title, summary, tags, importance and source (a PUT: a field
        left as None takes its default — no tags, importance 3, source api) and return it."""
        return await self._client._send(calls.entry_update(
            entry_id, title=title, summary=summary, tags=tags, importance=importance,
            source=source, idempotency_key=idempotency_key))

    async def delete(self, entry_id: str) -> None:
        """Delete the entry and its object; ``NotFound`` if absent."""
        await self._client._send(calls.entry_delete(entry_id))

    async def list(self, *, scope: str | None = None, scope_ref: str | None = None,
                   tag: str | None = None, search: str | None = None,
                   min_importance: int | None = None, include_summary: bool | None = None,
                   limit: int | None = None, cursor: str | None = None) -> Page[Entry]:
        """One page of entries filtered by scope, tag, minimum importance and ``search``
        (entries whose title or summary hold every word). Summaries are read when
        ``include_summary`` (by default only with ``search``); otherwise ``summary`` is None.
        Pass the page's ``next_cursor`` back for the next page."""
        return await self._client._send(calls.entry_list(
            scope=scope, scope_ref=scope_ref, tag=tag, search=search,
            min_importance=min_importance, include_summary=include_summary, limit=limit,
            cursor=cursor))

    def iter(self, *, scope: str | None = None, scope_ref: str | None = None,
             tag: str | None = None, search: str | None = None,
             min_importance: int | None = None, include_summary: bool | None = None,
             limit: int | None = None) -> AsyncIterator[Entry]:
        """Every matching entry, fetching pages of ``limit`` lazily as iteration goes."""
        return self._client._iterate(lambda cursor: calls.entry_list(
            scope=scope, scope_ref=scope_ref, tag=tag, search=search,
            min_importance=min_importance, include_summary=include_summary, limit=limit,
            cursor=cursor))


class AsyncCompactorAPI:
    """The daily compactor (admin role); reached as ``client.compactor``."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def run(self, *, dry_run: bool = False, scope: str | None = None,
                  scope_ref: str | None = None) -> Job:
        """Compact the caller's tenant now (or one scope, or one scope ref) and return the
        queued job; wait with ``client.jobs.wait(job.id)``: its ``result`` counts the buckets,
        events compressed and entries written. ``dry_run`` only counts. Safe beside the
        daily run: no event is ever summarised twice."""
        return await self._client._send(
            calls.compactor_run(dry_run=dry_run, scope=scope, scope_ref=scope_ref))

    async def get_config(self) -> CompactorConfig:
        """The tenant's thresholds (defaults: 3 events, older than 90 days) and the
        server's schedule."""
        return await self._client._send(calls.compactor_get_config())

    async def set_config(self, *, min_events: int | None = None,
                         older_than_days: int | None = None,
                         enabled: bool | None = None) -> CompactorConfig:
        """Set the tenant's thresholds (a PUT: a setting left as None takes its default)."""
        return await self._client._send(calls.compactor_set_config({
            "min_events": min_events, "older_than_days": older_than_days,
            "enabled": enabled}))

    async def provenance(self, entry_id: str) -> Provenance:
        """The summariser (provider, model, prompt version) and the id and SHA-256 of every
        event a compactor entry summarises."""
        return await self._client._send(calls.compactor_provenance(entry_id))


class AsyncSummarizerAPI:
    """The tenant's summariser for the compactor (admin role); reached as
    ``client.summarizer``."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def get_config(self) -> SummarizerConfig:
        """The configured summariser, without its API key (the offline one if none)."""
        return await self._client._send(calls.summarizer_get_config())

    async def set_config(self, *, base_url: str, model: str, api_key: str | None = None,
                         timeout_seconds: float | None = None, max_retries: int | None = None,
                         token_budget_per_run: int | None = None) -> SummarizerConfig:
        """Route the tenant's summaries to an OpenAI-compatible chat endpoint (``base_url``
        like ``https://api.openai.com/v1``). The server probes it first, under the same
        network rules as storage endpoints, and raises ``BadRequest`` naming what failed,
        saving nothing; the API key is stored sealed and never returned. Settings left as
        None take the server's defaults (timeout 30 s per attempt, 2 retries, the server's
        token budget per run)."""
        return await self._client._send(calls.summarizer_set_config({
            "base_url": base_url, "model": model, "api_key": api_key,
            "timeout_seconds": timeout_seconds, "max_retries": max_retries,
            "token_budget_per_run": token_budget_per_run}))

    async def delete_config(self) -> SummarizerConfig:
        """Go back to the built-in offline extractive summariser (the stored key is
        deleted); returns that configuration."""
        return await self._client._send(calls.summarizer_delete_config())


class AsyncStorageConfigsAPI:
    """Several named storage configurations per tenant (admin role; compliance may read);
    mixed into ``client.storage``. Configurations are addressed by ``sc_…`` ids."""

    _client: AsyncSender

    async def create_config(self, name: str, storage_type: str | None = None,
                            connection_config: Mapping[str, Any] | None = None, *,
                            config: Mapping[str, Any] | None = None,
                            make_default: bool = False,
                            idempotency_key: str | None = None) -> StorageConfig:
        """Add a named bucket configuration. The server probes the bucket and checks its
        declared ``region`` against the bucket's own location first, raising ``BadRequest``
        naming what failed (both regions on a mismatch) and saving nothing. ``config`` may
        instead give the seed's flat shape ``{"type": "gcs", "bucket": ..., "region": ...}``.
        ``make_default`` also makes it where new memories go."""
        if config is not None:
            storage_type, connection_config = config_calls.seed_storage_config(config)
        if storage_type is None or connection_config is None:
            raise ValueError("give storage_type and connection_config, or config")
        return await self._client._send(config_calls.config_create(
            name=name, storage_type=storage_type, connection_config=connection_config,
            make_default=make_default, idempotency_key=idempotency_key))

    async def list_configs(self) -> list[StorageConfig]:
        """Every configuration of the tenant, without secrets: the default first."""
        return (await self._client._send(config_calls.config_list())).items

    async def get_config_by_id(self, storage_config_id: str) -> StorageConfig:
        """One configuration by its ``sc_…`` id; ``NotFound`` if absent."""
        return await self._client._send(config_calls.config_get(storage_config_id))

    async def rename_config(self, storage_config_id: str, name: str) -> StorageConfig:
        """Rename a configuration (its bucket and credentials never change in place)."""
        return await self._client._send(config_calls.config_rename(storage_config_id, name))

    async def set_default_config(self, storage_config_id: str) -> StorageConfig:
        """New memories go to this configuration from now on; older ones stay readable."""
        return await self._client._send(config_calls.config_make_default(storage_config_id))

    async def delete_config(self, storage_config_id: str) -> None:
        """Delete a configuration; ``Conflict`` while it is the default, holds memories or
        events (the error counts them) or an agent routes to it."""
        await self._client._send(config_calls.config_delete(storage_config_id))


class AsyncAgentsAPI:
    """Agents and their memory settings; reached as ``client.agents``."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def update(self, agent_id: str, settings: Mapping[str, Any] | None = None, *,
                     name: str | None = None, user_memory_enabled: bool | None = None,
                     retention: str | None = None,
                     storage_config_id: str | None = None) -> Agent:
        """Create or replace the agent's settings (a PUT: what is left out takes its
        default). ``settings`` takes the seed's shape as written,
        ``{"memory": {"userMemory": {"enabled": True, "retention": "90d",
        "storageConfigId": "sc_…"}}}``; or pass the keyword arguments. The agent's user
        memories (scope ``user``, or written with a ``user_id``) then go to that storage
        configuration; ``enabled=False`` makes their writes raise ``Conflict``."""
        return await self._client._send(config_calls.agent_update(
            agent_id, settings, name=name, user_memory_enabled=user_memory_enabled,
            retention=retention, storage_config_id=storage_config_id))

    async def get(self, agent_id: str) -> Agent:
        """The agent's settings; ``NotFound`` if it has none."""
        return await self._client._send(config_calls.agent_get(agent_id))

    async def list(self, *, limit: int | None = None,
                   cursor: str | None = None) -> Page[Agent]:
        """One page of agents by id; pass the page's ``next_cursor`` back for the next."""
        return await self._client._send(config_calls.agent_list(limit=limit, cursor=cursor))

    def iter(self, *, limit: int | None = None) -> AsyncIterator[Agent]:
        """Every agent, fetching pages lazily."""
        return self._client._iterate(
            lambda cursor: config_calls.agent_list(limit=limit, cursor=cursor))

    async def delete(self, agent_id: str) -> None:
        """Forget the agent's settings; its memories stay where they are."""
        await self._client._send(config_calls.agent_delete(agent_id))


class AsyncMemorySearchAPI:
    """``client.memory.search``: semantic + keyword search over memories, entries and
    knowledge chunks (mixed into ``client.memory``)."""

    _client: AsyncSender

    async def search(self, query: str, *, scope: str | None = None,
                     scope_ref: str | None = None, user_id: str | None = None,
                     memory_type: str | None = None, tags: Sequence[str] | None = None,
                     limit: int | None = None,
                     include_values: bool | None = None) -> SearchResults:
        """The ``limit`` (default 10, at most 100) memories most relevant to ``query``, best
        first: vector and keyword rankings fused, each value verified against its SHA-256.
        Without ``scope`` every scope the key may see is searched (``scope_ref`` needs
        ``scope``); ``user_id``, ``memory_type`` and ``tags`` (all of them) filter.
        Memories written in the last moments may not be indexed yet; deleted, overwritten,
        erased and expired ones never appear."""
        return await self._client._send(calls.memory_search(
            query=query, scope=scope, scope_ref=scope_ref, user_id=user_id,
            memory_type=memory_type, tags=tags, limit=limit, include_values=include_values))


class AsyncKnowledgeAPI:
    """Knowledge documents of an agent (the seed's addKnowledge); mixed into
    ``client.memory`` as ``add_knowledge``, ``list_knowledge``, ``iter_knowledge`` and
    ``delete_knowledge``."""

    _client: AsyncSender

    async def add_knowledge(self, agent_id: str, documents: Sequence[Mapping[str, Any]], *,
                            idempotency_key: str | None = None) -> KnowledgeAdded:
        """Store documents (``{"title", "content", "metadata"}``, up to 20 of up to 200,000
        characters) the agent then retrieves through search: each gets an id and is cut into
        chunks of at most 800 characters (100 of overlap), each an encrypted memory of the
        agent. A retry with the same ``idempotency_key`` writes only what is missing and
        answers as the first time."""
        return await self._client._send(calls.knowledge_add(
            agent_id=agent_id, documents=documents, idempotency_key=idempotency_key))

    async def list_knowledge(self, agent_id: str, *, limit: int | None = None,
                             cursor: str | None = None) -> Page[KnowledgeDocument]:
        """One page of the agent's documents (id, title, chunk count, size), in id order."""
        return await self._client._send(calls.knowledge_list(agent_id=agent_id, limit=limit,
                                                             cursor=cursor))

    def iter_knowledge(self, agent_id: str, *,
                       limit: int | None = None) -> AsyncIterator[KnowledgeDocument]:
        """Every document of the agent, fetching pages of ``limit`` lazily."""
        return self._client._iterate(lambda cursor: calls.knowledge_list(
            agent_id=agent_id, limit=limit, cursor=cursor))

    async def delete_knowledge(self, document_id: str) -> KnowledgeDeleted:
        """Delete a document and all its chunks; ``NotFound`` if there is none."""
        return await self._client._send(calls.knowledge_delete(document_id))


class AsyncEmbedderAPI:
    """The tenant's embedder for search (admin to change, compliance may read); reached as
    ``client.embedder``."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def get_config(self) -> EmbedderConfig:
        """The configured embeddings endpoint, without its API key (the server's default
        embedder if none)."""
        return await self._client._send(calls.embedder_get_config())

    async def set_config(self, *, base_url: str, model: str, api_key: str | None = None,
                         timeout_seconds: float | None = None,
                         max_retries: int | None = None) -> EmbedderConfig:
        """Embed the tenant's memories and queries with an OpenAI-compatible embeddings
        endpoint (``base_url`` like ``https://api.openai.com/v1``). The server probes it
        first, under the same network rules as storage endpoints, and raises ``BadRequest``
        naming what failed, saving nothing; the API key is stored sealed, never returned."""
        return await self._client._send(calls.embedder_set_config({
            "base_url": base_url, "model": model, "api_key": api_key,
            "timeout_seconds": timeout_seconds, "max_retries": max_retries}))

    async def delete_config(self) -> EmbedderConfig:
        """Go back to the server's default embedder (the stored key is deleted)."""
        return await self._client._send(calls.embedder_delete_config())


class AsyncConversationsAPI:
    """Conversations and their context windows; reached as ``client.conversations``.

    Each message is stored encrypted in the tenant's bucket (scope ``conversation``, the
    user as data subject); the server counts tokens with the model's tokenizer, flags
    ``needs_summarization`` near the limit and summarises older messages on its own.
    """

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def add_message(self, conversation_id: str, role: str, content: str, *,
                          user_id: str | None = None, agent_id: str | None = None,
                          model: str | None = None, context_window_limit: int | None = None,
                          idempotency_key: str | None = None) -> MessageAdded:
        """Add a message (``role`` system, user, assistant or tool); the first one creates
        the conversation and fixes its ``model`` (default gpt-4o) and data subject
        ``user_id``. A retry with the same ``idempotency_key`` returns the first answer."""
        return await self._client._send(conversations.add_message(
            conversation_id, role=role, content=content, user_id=user_id, agent_id=agent_id,
            model=model, context_window_limit=context_window_limit,
            idempotency_key=idempotency_key))

    async def get(self, conversation_id: str) -> Conversation:
        """The conversation's state (token usage, summary); ``NotFound`` if absent."""
        return await self._client._send(conversations.get(conversation_id))

    async def messages(self, conversation_id: str, *, after: int | None = None,
                       limit: int | None = None, cursor: str | None = None) -> Page[Message]:
        """One page of messages in seq order (after seq ``after``), each verified."""
        return await self._client._send(conversations.messages(
            conversation_id, after=after, limit=limit, cursor=cursor))

    async def context(self, conversation_id: str, *, system_prompt: str, message: str,
                      token_budget: int, model: str | None = None,
                      memory_scopes: Sequence[tuple[str, str]] | None = None,
                      memory_limit: int | None = None) -> ContextWindow:
        """Assemble the window for the next model call within ``token_budget``: system
        prompt, current message, relevant memories of ``memory_scopes`` ((scope,
        scope_ref) pairs), recent messages, then the summary; ``report`` says what was
        included, summarized or dropped and why."""
        return await self._client._send(conversations.context(
            conversation_id, system_prompt=system_prompt, message=message,
            token_budget=token_budget, model=model, memory_scopes=memory_scopes,
            memory_limit=memory_limit))

    async def summarize(self, conversation_id: str) -> Job:
        """Summarise the older messages now: the queued job (wait with
        ``client.jobs.wait(job.id)``)."""
        return await self._client._send(conversations.summarize(conversation_id))

    async def delete(self, conversation_id: str) -> None:
        """Delete the conversation: its messages, its summary and its state."""
        await self._client._send(conversations.delete(conversation_id))


class AsyncRetentionAPI:
    """Retention policies and runs; reached as ``client.retention`` (admin changes them,
    compliance may read them)."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def set_policy(self, *, scope: str, retention_days: int, auto_delete: bool,
                         memory_type: str | None = None,
                         archive_after_days: int | None = None) -> RetentionPolicy:
        """Create or replace the policy of ``scope`` and ``memory_type`` (None: every type of
        the scope that no policy of its own covers; ``event``: raw events; ``entry``: curated
        entries). With ``auto_delete`` the daily run deletes what was last written
        ``retention_days`` ago or more, on both planes with every object version; without it
        the run only reports what is due. ``archive_after_days`` moves older objects to the
        bucket's colder class first."""
        return await self._client._send(hygiene.retention_put(
            scope=scope, retention_days=retention_days, auto_delete=auto_delete,
            memory_type=memory_type, archive_after_days=archive_after_days))

    async def list_policies(self) -> list[RetentionPolicy]:
        """The tenant's policies."""
        page = await self._client._send(hygiene.retention_list())
        return list(page.items)

    async def delete_policy(self, policy_id: str) -> None:
        """Delete a policy; ``NotFound`` if absent."""
        await self._client._send(hygiene.retention_delete(policy_id))

    async def run(self, *, dry_run: bool = False) -> Job:
        """Apply the policies and purge expired ``ttl_days`` memories now; returns the queued
        job (wait with ``client.jobs.wait(job.id)``): its ``result`` counts, per policy, what
        was due, deleted, held and archived. ``dry_run`` only counts."""
        return await self._client._send(hygiene.retention_run(dry_run=dry_run))


class AsyncLegalHoldsAPI:
    """Legal holds (admin or compliance); reached as ``client.legal_holds``."""

    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def place(self, *, reason: str, user_id: str | None = None,
                    scope: str | None = None, scope_ref: str | None = None,
                    tenant: bool = False, idempotency_key: str | None = None) -> LegalHold:
        """Hold a data subject (``user_id``), a scope ref (``scope`` + ``scope_ref``) or the
        whole tenant (``tenant=True``); ``reason`` is litigation, regulatory, investigation,
        audit or other. Retention and cleanup pass over what it covers, deletes of it raise
        ``Conflict`` (``legal_hold``), and the subject's erasure is refused until it is
        lifted."""
        return await self._client._send(hygiene.hold_place({
            "reason": reason, "user_id": user_id, "scope": scope, "scope_ref": scope_ref,
            "tenant": tenant or None}, idempotency_key))

    async def list(self) -> list[LegalHold]:
        """Every hold of the tenant, active and lifted, oldest first."""
        page = await self._client._send(hygiene.hold_list())
        return list(page.items)

    async def lift(self, hold_id: str) -> LegalHold:
        """Lift a hold (audited with the key and the time); the held subject's id is then
        kept only as a keyed hash."""
        return await self._client._send(hygiene.hold_lift(hold_id))
