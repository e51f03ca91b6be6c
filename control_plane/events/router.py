from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import JSONResponse

from ..addresses import Scope
from ..db.models import MemoryEvent
from ..deps import SUBJECT_WRITER, PlaneDep, SessionDep, SubjectReaderCaller, call_of
from ..idempotency import Idempotency, Replay
from ..kit import PLAIN_TEXT
from . import service as events
from .schemas import KIND_PATTERN, EventIn, EventOut, EventPage, EventWithBodyOut

router = APIRouter(tags=["events"])

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]


def _answer(result: MemoryEvent | Replay) -> JSONResponse:
    if isinstance(result, Replay):
        return JSONResponse(result.response, status_code=result.status_code,
                            headers={"Idempotent-Replayed": "true"})
    return JSONResponse(EventOut.of(result).model_dump(mode="json"), status_code=201)


@router.post("/v1/events", response_model=EventOut, status_code=201)
def append_event(body: EventIn, request: Request,
                 idempotency_key: IdempotencyKey = None) -> JSONResponse:
    """Append an immutable event to the raw log: its Markdown body goes (encrypted) to the
    tenant's bucket under a time-sharded path, its metadata to the control plane. There is no
    update or delete: only erasure and retention remove events. Send an `Idempotency-Key`
    header to make retries safe."""
    with call_of(request, SUBJECT_WRITER) as call:  # no dependencies: agents append every turn
        idem = Idempotency.of(idempotency_key, "POST", "/v1/events", body.model_dump_json())
        return _answer(events.append_event(call.session, call.plane, call.caller.actor, body,
                                           access=call.caller.access, idem=idem))


@router.get("/v1/events", response_model=EventPage)
def list_events(caller: SubjectReaderCaller, session: SessionDep,
                scope: Scope | None = None,
                scope_ref: Annotated[str | None, Query(min_length=1, max_length=256,
                                                       pattern=PLAIN_TEXT)] = None,
                kind: Annotated[str | None, Query(
                    pattern=KIND_PATTERN, description="Only events of this kind, e.g. "
                    "call_summary.")] = None,
                since: datetime | None = None, until: datetime | None = None,
                include_compressed: Annotated[bool, Query(
                    description="Also list events the compactor has summarised into an "
                    "entry; default false.")] = False,
                limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
                cursor: str | None = None) -> EventPage:
    """List events (metadata, no bodies) in (occurred_at, id) order, filtered by scope, scope
    ref, kind and time (`since` inclusive, `until` exclusive, with a timezone). Events the
    compactor has summarised are left out unless `include_compressed=true`."""
    rows, next_cursor = events.list_events(
        session, caller.actor, scope=scope, scope_ref=scope_ref, kind=kind, since=since,
        until=until, include_compressed=include_compressed, cursor=cursor, limit=limit,
        access=caller.access)
    return EventPage(items=[EventOut.of(e) for e in rows], next_cursor=next_cursor)


@router.get("/v1/events/{event_id}", response_model=EventWithBodyOut)
def get_event(event_id: Annotated[uuid.UUID, Path(description="The event's id.")],
              caller: SubjectReaderCaller, session: SessionDep,
              plane: PlaneDep) -> EventWithBodyOut:
    """Read one event with its body, verified against its SHA-256 (409 `hash_mismatch` if the
    stored body is missing or altered)."""
    found = events.get_event(session, plane, caller.actor, event_id, access=caller.access)
    return EventWithBodyOut(**EventOut.of(found.event).model_dump(), body=found.body)
