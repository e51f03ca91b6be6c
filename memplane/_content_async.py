"""The memory layer's content namespaces for ``AsyncClient``: ``client.events``,
``client.entries``, ``client.conversations``, and the search and knowledge methods of
``client.memory``.

This file is the one written by hand; ``_content_sync.py`` is generated from it by
``scripts/unasync.py`` (a test fails when the two drift apart), so each method exists once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from . import _conversations as conversations
from . import _layer_calls as calls
from ._compliance import Job
from ._conversations import ContextWindow, Conversation, Message, MessageAdded
from ._models import (
    Entry,
    Event,
    EventWithBody,
    KnowledgeAdded,
    KnowledgeDeleted,
    KnowledgeDocument,
    Page,
    SearchResults,
)
from ._namespace_async import AsyncSender

__all__ = ["AsyncConversationsAPI", "AsyncEntriesAPI", "AsyncEventsAPI", "AsyncKnowledgeAPI",
           "AsyncMemorySearchAPI"]


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
        scope_ref) pairs; omitted: the conversation's user, agent and the agent's teams;
        ``[]``: none), recent messages, then the summary; ``report`` says what was
        included, summarized or dropped and why, ``searched_scopes`` where it looked."""
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
