from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ..deps import SUBJECT_READER, call_of
from ..kit import json_of
from . import service
from .schemas import SearchIn, SearchOut, SearchResultOut

router = APIRouter(tags=["search"])


def searching(request: Request) -> service.Searching:
    """The running server's search: its settings, data plane, sessions and search cache
    (more than ``deps.get_runtime`` promises), for this route and context assembly's."""
    running: service.Searching = request.app.state.runtime
    return running


@router.post("/v1/search", response_model=SearchOut)
def search(body: SearchIn, request: Request) -> Response:
    """The memories, entries and knowledge chunks most relevant to `query`: vector and
    keyword rankings fused, each result live (deleted, overwritten, erased and expired
    memories never appear) and its value verified against its SHA-256. Agents, admins and
    compliance officers may search; a scoped key searches only its scopes. The query itself
    is neither stored nor logged; the audit log gets one `search` row with the count."""
    # No dependencies, answered as bytes from the worker thread: an agent searches every turn
    # (see deps.call_of and kit.json_of).
    with call_of(request, SUBJECT_READER) as call:
        found = service.search(call.session, searching(request), call.caller.actor, body,
                               access=call.caller.access)
    return json_of(SearchOut(
        results=[SearchResultOut(kind=h.kind, pointer_id=h.pointer_id, scope=h.scope,  # type: ignore[arg-type]
                                 scope_ref=h.scope_ref, key=h.key, title=h.title,
                                 memory_type=h.memory_type, tags=h.tags, score=h.score,
                                 value=h.value) for h in found.hits],
        embedder=found.embedder, took_ms=round(found.took_ms, 3)))
