from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Response
from fastapi.responses import JSONResponse

from ..addresses import Scope
from ..db.models import MemoryPointer
from ..deps import PlaneDep, SessionDep, SubjectReaderCaller, SubjectWriterCaller, WriterCaller
from ..dlp.guard import as_stored
from ..idempotency import Idempotency, Replay
from ..kit import PLAIN_TEXT
from . import service as entries
from .schemas import EntryIn, EntryOut, EntryPage, EntryUpdate

router = APIRouter(tags=["entries"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
EntryId = Annotated[uuid.UUID, Path(description="The entry's id, as returned when it was "
                                               "created.")]
Tag = Annotated[str | None, Query(max_length=256, pattern=PLAIN_TEXT,
                                  description="Only entries carrying this tag.")]
Search = Annotated[str | None, Query(
    max_length=512, pattern=PLAIN_TEXT,
    description="Only entries whose title or summary hold every one of these words (case "
                "ignored, no stemming); answers include the summaries unless "
                "include_summary=false.")]
MinImportance = Annotated[int | None, Query(ge=1, le=5, description="Only entries of at "
                                            "least this importance (1 to 5).")]
IncludeSummary = Annotated[bool | None, Query(description="Read each listed entry's summary "
                                              "from the bucket; default: only with search.")]
ScopeRef = Annotated[str | None, Query(max_length=256, pattern=PLAIN_TEXT)]


def _answer(result: MemoryPointer | Replay, summary: str,
            status_code: int = 200) -> EntryOut | JSONResponse:
    if isinstance(result, Replay):
        # The stored first answer holds no summary (I7); the request — the same one, by its
        # fingerprint — carries it.
        return JSONResponse(result.response | {"summary": summary},
                            status_code=result.status_code,
                            headers={"Idempotent-Replayed": "true"})
    return EntryOut.with_summary(result, summary)


@router.post("/v1/entries", response_model=EntryOut, status_code=201)
def create_entry(body: EntryIn, caller: SubjectWriterCaller, session: SessionDep, plane: PlaneDep,
                 idempotency_key: IdempotencyKey = None) -> EntryOut | JSONResponse:
    """Create a curated entry: the Markdown summary goes (encrypted) to the tenant's bucket;
    the title, tags, importance and source to the control plane, and the summary's words
    only as a keyed blind index. `source` 'compactor' is the compactor's alone. Send an
    `Idempotency-Key` header to make retries safe."""
    idem = Idempotency.of(idempotency_key, "POST", "/v1/entries", body.model_dump_json())
    return _answer(entries.create_entry(session, plane, caller.actor, body, idem=idem,
                                        access=caller.access),
                   as_stored(session, caller.actor, body.summary), 201)


@router.get("/v1/entries", response_model=EntryPage)
def list_entries(caller: SubjectReaderCaller, session: SessionDep, plane: PlaneDep,
                 scope: Scope | None = None, scope_ref: ScopeRef = None,
                 tag: Tag = None, search: Search = None,
                 min_importance: MinImportance = None,
                 include_summary: IncludeSummary = None,
                 limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
                 cursor: str | None = None) -> EntryPage:
    """List entries, filtered by scope, scope ref, tag, minimum importance and `search` (the
    entries whose title or summary hold every word; case and accents of the compatibility
    form ignored, no stemming). Summaries are read from the bucket when `include_summary`
    is true, which is the default when `search` is given; otherwise `summary` is null."""
    items, next_cursor = entries.list_entries(
        session, plane, caller.actor, scope=scope, scope_ref=scope_ref, tag=tag,
        search=search, min_importance=min_importance, cursor=cursor, limit=limit,
        access=caller.access, include_summary=include_summary)
    return EntryPage(items=[EntryOut.with_summary(i.pointer, i.summary) for i in items],
                     next_cursor=next_cursor)


@router.get("/v1/entries/{entry_id}", response_model=EntryOut)
def get_entry(entry_id: EntryId, caller: SubjectReaderCaller, session: SessionDep,
              plane: PlaneDep) -> EntryOut:
    """Read an entry with its summary, verified against the pointer's SHA-256."""
    found = entries.get_entry(session, plane, caller.actor, entry_id, access=caller.access)
    return EntryOut.with_summary(found.pointer, found.summary)


@router.put("/v1/entries/{entry_id}", response_model=EntryOut)
def update_entry(entry_id: EntryId, body: EntryUpdate, caller: SubjectWriterCaller,
                 session: SessionDep, plane: PlaneDep,
                 idempotency_key: IdempotencyKey = None) -> EntryOut | JSONResponse:
    """Replace an entry's title, summary, tags, importance and source (fields left out take
    their defaults); a new object version, its search words rewritten."""
    idem = Idempotency.of(idempotency_key, "PUT", f"/v1/entries/{entry_id}",
                          body.model_dump_json())
    return _answer(entries.update_entry(session, plane, caller.actor, entry_id, body,
                                        idem=idem, access=caller.access),
                   as_stored(session, caller.actor, body.summary))


@router.delete("/v1/entries/{entry_id}", status_code=204)
def delete_entry(entry_id: EntryId, caller: WriterCaller, session: SessionDep,
                 plane: PlaneDep) -> Response:
    """Delete an entry: its object, its pointer and its search words; 204."""
    entries.delete_entry(session, plane, caller.actor, entry_id, access=caller.access)
    return Response(status_code=204)
