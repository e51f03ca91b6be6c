from __future__ import annotations

from enum import StrEnum
from typing import Annotated
from urllib.parse import unquote

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from ..addresses import MemoryAddress, Scope
from ..db.models import MemoryPointer
from ..deps import (
    READER,
    SUBJECT_READER,
    SUBJECT_WRITER,
    WRITER,
    PlaneDep,
    SessionDep,
    WriterCaller,
    call_of,
    get_runtime,
)
from ..idempotency import Idempotency, Replay
from ..kit import PLAIN_TEXT, json_of, to_json
from . import batch as batches
from . import service as memories
from . import ttl_refresh
from .batch_gets import check_values_page, listed_values
from .plain_params import plain_route
from .schemas import (
    AppendIn,
    Cleared,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    PointerOrder,
    PointerOut,
    PointerPage,
    meta_of,
    pointer_json,
)

router = APIRouter(tags=["memories"])

# Path segments arrive with "%2F" and "%25" still encoded (see app.EncodedSlashes), so a key
# or scope ref may hold any character and still be exactly one segment.
#
# The busiest routes take no dependencies: they find their caller and session with
# ``call_of`` in their worker thread (see deps).


def _address(scope: Scope, scope_ref: str, key: str | None = None) -> MemoryAddress:
    return MemoryAddress.parse(scope, unquote(scope_ref),
                               unquote(key) if key is not None else None)


_REFRESH = ("true: restart the memory's ttl (ttl_days or ttl_seconds) from now, as "
            "LangGraph's refresh_on_read does; expires_at in the answer is the new one.")
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
FilterText = Annotated[str | None, Query(max_length=256, pattern=PLAIN_TEXT)]


_ORDER = ("created (the default): in the order they were first written; key / key_desc: by "
          "key, byte by byte, up or down (memories by key only: entries have no key); "
          "updated_desc: by last write, newest first (a memory written again during a walk "
          "moves ahead of the walk: it may be missed or seen twice). A cursor continues the "
          "order its page was listed in.")


_VALUES = ("Answer each memory with its value, read from the bucket and verified as a read "
           "is (and audited as one): memories by key only, and only those a read would serve "
           "(none being written or deleted); at most 100 a page.")


class SyncStatus(StrEnum):
    pending_write = "pending_write"
    synced = "synced"
    pending_delete = "pending_delete"
    corrupt = "corrupt"


def _answer(result: MemoryPointer | Replay) -> Response:
    if isinstance(result, Replay):
        return JSONResponse(result.response, status_code=result.status_code,
                            headers={"Idempotent-Replayed": "true"})
    return json_of(pointer_json(result))


def set_memory(scope: Scope, scope_ref: str, key: str, body: MemoryIn, request: Request,
               idempotency_key: IdempotencyKey = None) -> Response:
    """Write a memory: the JSON value goes (encrypted) to the tenant's bucket, the pointer and
    metadata to the control plane. Replaces an existing value. Send an `Idempotency-Key` header
    to make retries safe."""
    with call_of(request, SUBJECT_WRITER) as call:
        address = _address(scope, scope_ref, key)
        idem = (None if idempotency_key is None else  # (the body's JSON only for a fingerprint)
                Idempotency.of(idempotency_key, "PUT", address.describe(),
                               body.model_dump_json()))
        return _answer(memories.set_value(call.session, call.plane, call.caller.actor, address,
                                          body.value, meta_of(body), idem,
                                          access=call.caller.access))


def get_memory(scope: Scope, scope_ref: str, key: str, request: Request,
               refresh_ttl: Annotated[bool, Query(description=_REFRESH)] = False) -> Response:
    """Read a memory: the value from the tenant's bucket, verified against the pointer's SHA-256,
    and its pointer."""
    with call_of(request, SUBJECT_READER) as call:
        if refresh_ttl:
            ttl_refresh.may_restart(call.session, call.caller)
        result = memories.get_value(call.session, call.plane, call.caller.actor,
                                    _address(scope, scope_ref, key), access=call.caller.access)
        answer = {"value": result.value, "pointer": pointer_json(result.pointer)}
        if refresh_ttl:
            ttl_refresh.restart_answers(call.session, call.caller.actor.tenant_id, [answer])
    return json_of(answer)


_SCOPES = {scope.value: scope for scope in Scope}
_REFRESH_QUERY = {b"": False, b"refresh_ttl=false": False, b"refresh_ttl=true": True}


def _plain_write(request: Request) -> dict[str, object] | None:
    """A write's parameters but its body, when they need no checking beyond the router's
    match: a known scope, no query string, a body sent as ``application/json``."""
    path = request.scope["path_params"]
    scope = _SCOPES.get(path["scope"])
    headers = request.headers
    if scope is None or request.scope["query_string"] or \
            headers.get("content-type") != "application/json":
        return None
    return {"scope": scope, "scope_ref": path["scope_ref"], "key": path["key"],
            "idempotency_key": headers.get("idempotency-key")}


router.add_api_route("/v1/memories/{scope}/{scope_ref}/{key}", set_memory, methods=["PUT"],
                     response_model=PointerOut,
                     route_class_override=plain_route(_plain_write, MemoryIn))


def _plain_read(request: Request) -> dict[str, object] | None:
    """A read's parameters when they need no checking beyond the router's match: a known
    scope, and no query string or only ``refresh_ttl=true|false`` (see plain_params)."""
    path = request.scope["path_params"]
    scope = _SCOPES.get(path["scope"])
    refresh = _REFRESH_QUERY.get(request.scope["query_string"])
    if scope is None or refresh is None:
        return None
    return {"scope": scope, "scope_ref": path["scope_ref"], "key": path["key"],
            "refresh_ttl": refresh}


router.add_api_route("/v1/memories/{scope}/{scope_ref}/{key}", get_memory, methods=["GET"],
                     response_model=MemoryOut, route_class_override=plain_route(_plain_read))


@router.post("/v1/memories/{scope}/{scope_ref}/{key}/append", response_model=PointerOut)
def append_memory(scope: Scope, scope_ref: str, key: str, body: AppendIn, request: Request,
                  idempotency_key: IdempotencyKey = None) -> Response:
    """Append an item to a memory holding a JSON list (created if missing). Send an `Idempotency-
    Key` header to make retries safe."""
    with call_of(request, SUBJECT_WRITER) as call:
        address = _address(scope, scope_ref, key)
        idem = Idempotency.of(idempotency_key, "APPEND", address.describe(),
                              body.model_dump_json())
        return _answer(memories.append_value(call.session, call.plane, call.caller.actor,
                                             address, body.value, meta_of(body), idem,
                                             access=call.caller.access))


@router.delete("/v1/memories/{scope}/{scope_ref}/{key}", status_code=204)
def delete_memory(scope: Scope, scope_ref: str, key: str, request: Request) -> Response:
    """Delete a memory: its object from the bucket and its pointer; 204."""
    with call_of(request, WRITER) as call:
        memories.delete_value(call.session, call.plane, call.caller.actor,
                              _address(scope, scope_ref, key), access=call.caller.access)
    return Response(status_code=204)


@router.delete("/v1/memories/{scope}/{scope_ref}", response_model=Cleared)
def clear_scope(scope: Scope, scope_ref: str, caller: WriterCaller, session: SessionDep,
                plane: PlaneDep) -> Cleared:
    """Delete every memory of one scope ref (e.g. a whole conversation); returns how many."""
    deleted = memories.clear_scope(session, plane, caller.actor, _address(scope, scope_ref),
                                   access=caller.access)
    return Cleared(deleted=deleted)


@router.get("/v1/pointers", response_model=PointerPage | MemoryPage)
def list_pointers(request: Request, scope: Scope | None = None, scope_ref: FilterText = None,
                  user_id: FilterText = None, memory_type: FilterText = None,
                  sync_status: SyncStatus | None = None,
                  tag: Annotated[str | None, Query(max_length=256, pattern=PLAIN_TEXT,
                                                   description="Only pointers carrying this "
                                                               "tag.")] = None,
                  limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
                  cursor: str | None = None,
                  key_prefix: Annotated[str | None, Query(
                      min_length=1, max_length=255, pattern=PLAIN_TEXT,
                      description="Only pointers whose key starts with this text "
                                  "(taken literally: % and _ are not wildcards).")] = None,
                  order: Annotated[PointerOrder, Query(description=_ORDER)] = (
                      PointerOrder.created),
                  include_values: Annotated[bool, Query(description=_VALUES)] = False,
                  ) -> Response:
    """List pointers (metadata, no values) of the caller's tenant, filtered by scope, scope ref,
    user, memory type, sync status, tag or key prefix; paginated with `cursor`. With
    `include_values=true`: the memories by key a read would serve, each with its verified
    value (`{"value", "pointer"}`, as a read answers), at most 100 a page."""
    if include_values:
        check_values_page(limit)
    with call_of(request, SUBJECT_READER) as call:
        page = memories.page_of_pointers(
            call.session, call.caller.actor, scope=scope.canonical if scope else None,
            scope_ref=scope_ref, user_id=user_id, memory_type=memory_type,
            sync_status=sync_status, cursor=cursor, limit=limit, access=call.caller.access,
            tag=tag, key_prefix=key_prefix, batcher=call.plane.audit_batcher,
            order=order.value, readable=include_values)
        if include_values:
            values = listed_values(call.session, call.plane, call.caller.actor, page)
            return json_of({"items": [{"value": v.value, "pointer": pointer_json(v.pointer)}
                                      for v in values], "next_cursor": page.next_cursor})
    return json_of({"items": [pointer_json(p) for p in page.pointers],
                    "next_cursor": page.next_cursor})


@router.post("/v1/memories:batch", response_model=batches.BatchOut)
def batch_memories(body: batches.BatchIn, request: Request,
                   idempotency_key: IdempotencyKey = None) -> Response:
    """Run up to 1,000 set / get / delete operations (mixed scopes) in one request, each
    answered on its own in request order (`results[i].status` is what the single request
    would have answered). Operations on one address run in request order; others run
    concurrently. get needs a reader role, set and delete a writer role; scoped keys, the
    erasure guard and audit apply to every operation. Send an `Idempotency-Key` header to
    make retries safe: a retry answers each set and delete that succeeded from the first run."""
    with call_of(request, READER) as call:
        idem = (None if idempotency_key is None else
                Idempotency.of(idempotency_key, "BATCH", body.model_dump_json()))
        if any(raw.get("refresh_ttl") is True for raw in body.operations):
            ttl_refresh.may_restart(call.session, call.caller)
        answer = batches.run_batch(get_runtime(request).sessions, call.session, call.plane,
                                   call.caller, body.operations, idem)
        refreshed = [answer for answer, raw in zip(answer.results, body.operations,
                                                   strict=True)
                     if raw.get("refresh_ttl") is True and answer["op"] == "get"]
        ttl_refresh.restart_answers(call.session, call.caller.actor.tenant_id, refreshed)
    headers = {"Idempotent-Replayed": "true"} if answer.replayed else None
    # pydantic's serialiser: a quarter of the stdlib encoder's time for a hundred answers.
    return Response(to_json({"results": answer.results}), media_type="application/json",
                    headers=headers)
