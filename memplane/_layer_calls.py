"""Request builders for the memory layer: raw events, curated entries, the compactor and
the tenant's summariser.

Like those in ``_base.py`` they only describe an exchange (a ``Call``); the sync and async
clients send them, so every URL, body and parser is written once, here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ._base import (
    Call,
    _idempotency,
    _without_none,
    parse_model,
    parse_nothing,
    path_segment,
    query_params,
)
from ._compliance import Job
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
    SummarizerConfig,
)


def _id(value: str, name: str) -> str:
    return path_segment(str(value), name=name)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# -- events -----------------------------------------------------------------------------------


def event_append(*, scope: str, scope_ref: str, kind: str, body: str, source: str | None,
                 source_ref: str | None, occurred_at: datetime | None, user_id: str | None,
                 agent_id: str | None, idempotency_key: str | None) -> Call[Event]:
    fields = {"scope": scope, "scope_ref": scope_ref, "kind": kind, "body": body,
              "source": source, "source_ref": source_ref,
              "occurred_at": _instant(occurred_at), "user_id": user_id, "agent_id": agent_id}
    return Call("POST", "/v1/events", parse_model(Event), json=_without_none(fields),
                headers=_idempotency(idempotency_key))


def event_get(event_id: str) -> Call[EventWithBody]:
    return Call("GET", f"/v1/events/{_id(event_id, 'event_id')}", parse_model(EventWithBody))


def event_list(*, scope: str | None, scope_ref: str | None, kind: str | None,
               since: datetime | None, until: datetime | None,
               include_compressed: bool | None, limit: int | None,
               cursor: str | None) -> Call[Page[Event]]:
    params = query_params(scope=scope, scope_ref=scope_ref, kind=kind, since=since, until=until,
                    include_compressed=include_compressed, limit=limit, cursor=cursor)
    return Call("GET", "/v1/events", parse_model(Page[Event]), params=params)


# -- entries ----------------------------------------------------------------------------------


def entry_create(*, scope: str, scope_ref: str, title: str, summary: str,
                 tags: Sequence[str] | None, importance: int | None, source: str | None,
                 user_id: str | None, agent_id: str | None,
                 idempotency_key: str | None) -> Call[Entry]:
    fields = {"scope": scope, "scope_ref": scope_ref, "title": title, "summary": summary,
              "tags": None if tags is None else list(tags), "importance": importance,
              "source": source, "user_id": user_id, "agent_id": agent_id}
    return Call("POST", "/v1/entries", parse_model(Entry), json=_without_none(fields),
                headers=_idempotency(idempotency_key))


def entry_get(entry_id: str) -> Call[Entry]:
    return Call("GET", f"/v1/entries/{_id(entry_id, 'entry_id')}", parse_model(Entry))


def entry_update(entry_id: str, *, title: str, summary: str,
                 tags: Sequence[str] | None, importance: int | None, source: str | None,
                 idempotency_key: str | None) -> Call[Entry]:
    fields = {"title": title, "summary": summary,
              "tags": None if tags is None else list(tags), "importance": importance,
              "source": source}
    return Call("PUT", f"/v1/entries/{_id(entry_id, 'entry_id')}", parse_model(Entry),
                json=_without_none(fields), headers=_idempotency(idempotency_key))


def entry_delete(entry_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/entries/{_id(entry_id, 'entry_id')}", parse_nothing)


def entry_list(*, scope: str | None, scope_ref: str | None, tag: str | None,
               search: str | None, min_importance: int | None,
               include_summary: bool | None, limit: int | None,
               cursor: str | None) -> Call[Page[Entry]]:
    params = query_params(scope=scope, scope_ref=scope_ref, tag=tag, search=search,
                    min_importance=min_importance, include_summary=include_summary,
                    limit=limit, cursor=cursor)
    return Call("GET", "/v1/entries", parse_model(Page[Entry]), params=params)


# -- compactor and summariser -----------------------------------------------------------------


def compactor_run(*, dry_run: bool, scope: str | None,
                  scope_ref: str | None) -> Call[Job]:
    return Call("POST", "/v1/compactor/run", parse_model(Job),
                json=_without_none({"dry_run": dry_run, "scope": scope, "scope_ref": scope_ref}))


def compactor_get_config() -> Call[CompactorConfig]:
    return Call("GET", "/v1/compactor/config", parse_model(CompactorConfig))


def compactor_set_config(settings: Mapping[str, Any]) -> Call[CompactorConfig]:
    return Call("PUT", "/v1/compactor/config", parse_model(CompactorConfig),
                json=_without_none(settings))


def compactor_provenance(entry_id: str) -> Call[Provenance]:
    return Call("GET", f"/v1/compactor/provenance/{_id(entry_id, 'entry_id')}",
                parse_model(Provenance))


def summarizer_get_config() -> Call[SummarizerConfig]:
    return Call("GET", "/v1/summarizer/config", parse_model(SummarizerConfig))


def summarizer_set_config(settings: Mapping[str, Any]) -> Call[SummarizerConfig]:
    return Call("PUT", "/v1/summarizer/config", parse_model(SummarizerConfig),
                json=_without_none(settings))


def summarizer_delete_config() -> Call[SummarizerConfig]:
    return Call("DELETE", "/v1/summarizer/config", parse_model(SummarizerConfig))


# -- search -----------------------------------------------------------------------------------


def memory_search(*, query: str, scope: str | None, scope_ref: str | None,
                  user_id: str | None, memory_type: str | None, tags: Sequence[str] | None,
                  limit: int | None, include_values: bool | None) -> Call[SearchResults]:
    body = _without_none({"query": query, "scope": scope, "scope_ref": scope_ref,
                          "user_id": user_id, "memory_type": memory_type,
                          "tags": list(tags) if tags is not None else None, "limit": limit,
                          "include_values": include_values})
    return Call("POST", "/v1/search", parse_model(SearchResults), json=body)
# -- knowledge and the tenant's embedder ------------------------------------------------------


def knowledge_add(*, agent_id: str, documents: Sequence[Mapping[str, Any]],
                  idempotency_key: str | None) -> Call[KnowledgeAdded]:
    return Call("POST", "/v1/knowledge", parse_model(KnowledgeAdded),
                json={"agent_id": agent_id, "documents": [dict(d) for d in documents]},
                headers=_idempotency(idempotency_key))


def knowledge_list(*, agent_id: str, limit: int | None,
                   cursor: str | None) -> Call[Page[KnowledgeDocument]]:
    return Call("GET", "/v1/knowledge", parse_model(Page[KnowledgeDocument]),
                params=query_params(agent_id=agent_id, limit=limit, cursor=cursor))


def knowledge_delete(document_id: str) -> Call[KnowledgeDeleted]:
    return Call("DELETE", f"/v1/knowledge/{_id(document_id, 'document_id')}",
                parse_model(KnowledgeDeleted))


def embedder_get_config() -> Call[EmbedderConfig]:
    return Call("GET", "/v1/embedder/config", parse_model(EmbedderConfig))


def embedder_set_config(settings: Mapping[str, Any]) -> Call[EmbedderConfig]:
    return Call("PUT", "/v1/embedder/config", parse_model(EmbedderConfig),
                json=_without_none(settings))


def embedder_delete_config() -> Call[EmbedderConfig]:
    return Call("DELETE", "/v1/embedder/config", parse_model(EmbedderConfig))
