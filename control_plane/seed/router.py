"""The seed's own routes: ``/memory`` for curated entries, ``/memory/events`` for raw events.

Each route only translates the seed's spelling (``scopeRef`` next to ``scope_ref``,
camelCase bodies) and calls the v1 route it aliases, so auth, roles, scoped keys, audit,
idempotency and error shapes are the v1 ones by construction. The mapping is in
docs/seed-routes.md.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from ..addresses import Scope
from ..deps import PlaneDep, ReaderCaller, SessionDep, WriterCaller
from ..entries import router as v1_entries
from ..entries.schemas import EntryOut, EntryPage
from ..errors import InvalidInput
from ..events import router as v1_events
from ..events.schemas import KIND_PATTERN, EventOut
from ..kit import PLAIN_TEXT
from .schemas import SeedEntryIn, SeedEntryUpdate, SeedEventIn, SeedEventOut, SeedEventPage

router = APIRouter(tags=["seed routes"])

T = TypeVar("T")


def _text(description: str, alias: str | None = None, max_length: int = 256) -> Any:
    return Query(alias=alias, min_length=1, max_length=max_length, pattern=PLAIN_TEXT,
                 description=description)


def _flag(description: str, alias: str | None = None) -> Any:
    return Query(alias=alias, description=description)


def _camel(of: str) -> str:
    return f"The seed's spelling of {of}; same meaning (send one of the two)."


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
ScopeRefCamel = Annotated[str | None, _text(_camel("scope_ref"), alias="scopeRef")]
Limit = Annotated[int | None, Query(ge=1, le=1000)]
EntryId = Annotated[uuid.UUID, Path(description="The entry's id (the `id` POST /memory "
                                                "answered).")]


def _one(name: str, snake: T | None, camel: T | None) -> T | None:
    """The value of a parameter the caller may spell two ways; both, differing, is refused."""
    if snake is not None and camel is not None and snake != camel:
        raise InvalidInput(f"query parameters {name} and its camelCase spelling have different "
                           f"values; send one of them")
    return snake if snake is not None else camel


# Routes for /memory/events come before /memory/{entry_id}, which would otherwise take
# "events" for an id.


@router.post("/memory/events", response_model=EventOut, status_code=201)
def append_event(body: SeedEventIn, request: Request,
                 idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """`POST /v1/events` under the seed's path; camelCase names (`scopeRef`, `sourceRef`,
    `occurredAt`, `userId`, `agentId`) are accepted besides the column names."""
    return v1_events.append_event(body=body, request=request, idempotency_key=idempotency_key)


@router.get("/memory/events", response_model=SeedEventPage)
def list_events(
    caller: ReaderCaller, session: SessionDep, plane: PlaneDep,
    scope: Scope | None = None,
    scope_ref: Annotated[str | None, _text("Only events of this entity, project, team …")]
    = None,
    scope_ref_: ScopeRefCamel = None,
    kind: Annotated[str | None, Query(pattern=KIND_PATTERN, description="Only events of "
                                      "this kind (call_summary, decision, …).")] = None,
    since: datetime | None = None, until: datetime | None = None,
    include_compressed: Annotated[bool | None, _flag(
        "Also events the compactor has summarised into an entry; default false.")] = None,
    include_compressed_: Annotated[bool | None, _flag(
        _camel("include_compressed"), alias="includeCompressed")] = None,
    include_body: Annotated[bool | None, _flag(
        "false: metadata only, no bucket reads; default true.")] = None,
    include_body_: Annotated[bool | None, _flag(_camel("include_body"),
                                                alias="includeBody")] = None,
    limit: Limit = None, cursor: str | None = None,
) -> SeedEventPage:
    """`GET /v1/events` under the seed's path, with each event's `body` (read from the bucket,
    verified, and audited like `GET /v1/events/{id}`) unless `includeBody=false`. Compressed
    events are left out unless `includeCompressed=true`."""
    page = v1_events.list_events(
        caller=caller, session=session, scope=scope,
        scope_ref=_one("scope_ref", scope_ref, scope_ref_), kind=kind, since=since,
        until=until,
        include_compressed=bool(_one("include_compressed", include_compressed,
                                     include_compressed_)),
        limit=limit, cursor=cursor)
    if _one("include_body", include_body, include_body_) is False:
        return SeedEventPage(items=[SeedEventOut(**e.model_dump()) for e in page.items],
                             next_cursor=page.next_cursor)
    items = [SeedEventOut(**v1_events.get_event(event_id=e.id, caller=caller, session=session,
                                                plane=plane).model_dump())
             for e in page.items]
    return SeedEventPage(items=items, next_cursor=page.next_cursor)


@router.get("/memory", response_model=EntryPage)
def list_entries(
    caller: ReaderCaller, session: SessionDep, plane: PlaneDep,
    scope: Scope | None = None,
    scope_ref: Annotated[str | None, _text("Only entries of this entity, project, team …")]
    = None,
    scope_ref_: ScopeRefCamel = None,
    tag: Annotated[str | None, _text("Only entries with this tag.")] = None,
    search: Annotated[str | None, _text("Only entries whose title or summary hold every one "
                                        "of these words.", max_length=512)] = None,
    min_importance: Annotated[int | None, Query(ge=1, le=5, description="Only entries this "
                                                "important or more (1 to 5).")] = None,
    min_importance_: Annotated[int | None, Query(alias="minImportance", ge=1, le=5,
                                                 description=_camel("min_importance"))]
    = None,
    include_summary: Annotated[bool | None, _flag(
        "false: metadata only, no bucket reads; default true.")] = None,
    include_summary_: Annotated[bool | None, _flag(_camel("include_summary"),
                                                   alias="includeSummary")] = None,
    limit: Limit = None, cursor: str | None = None,
) -> EntryPage:
    """`GET /v1/entries` under the seed's path, with each entry's `summary` unless
    `includeSummary=false`."""
    include = _one("include_summary", include_summary, include_summary_)
    return v1_entries.list_entries(
        caller=caller, session=session, plane=plane, scope=scope,
        scope_ref=_one("scope_ref", scope_ref, scope_ref_), tag=tag, search=search,
        min_importance=_one("min_importance", min_importance, min_importance_),
        include_summary=include is not False, limit=limit, cursor=cursor)


@router.post("/memory", response_model=EntryOut, status_code=201)
def create_entry(body: SeedEntryIn, caller: WriterCaller, session: SessionDep,
                 plane: PlaneDep, idempotency_key: IdempotencyKey = None
                 ) -> EntryOut | JSONResponse:
    """`POST /v1/entries` under the seed's path; camelCase names accepted."""
    return v1_entries.create_entry(body=body, caller=caller, session=session, plane=plane,
                                   idempotency_key=idempotency_key)


@router.get("/memory/{entry_id}", response_model=EntryOut)
def get_entry(entry_id: EntryId, caller: ReaderCaller, session: SessionDep,
              plane: PlaneDep) -> EntryOut:
    """`GET /v1/entries/{id}` under the seed's path: the entry with its summary."""
    return v1_entries.get_entry(entry_id=entry_id, caller=caller, session=session, plane=plane)


@router.put("/memory/{entry_id}", response_model=EntryOut)
def update_entry(entry_id: EntryId, body: SeedEntryUpdate, caller: WriterCaller,
                 session: SessionDep, plane: PlaneDep,
                 idempotency_key: IdempotencyKey = None) -> EntryOut | JSONResponse:
    """`PUT /v1/entries/{id}` under the seed's path; camelCase names accepted."""
    return v1_entries.update_entry(entry_id=entry_id, body=body, caller=caller, session=session,
                                   plane=plane, idempotency_key=idempotency_key)


@router.delete("/memory/{entry_id}", status_code=204)
def delete_entry(entry_id: EntryId, caller: WriterCaller, session: SessionDep,
                 plane: PlaneDep) -> Response:
    """`DELETE /v1/entries/{id}` under the seed's path: the entry and its object; 204."""
    return v1_entries.delete_entry(entry_id=entry_id, caller=caller, session=session,
                                   plane=plane)
