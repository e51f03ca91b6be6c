"""Memories by key, many at once: ``POST /v1/memories:batch``.

Each operation is answered on its own, exactly as the single request would answer it: the
same validation sentence, the same role and scoped-key checks (an out-of-scope address is a
404 like a missing one), the same 409 while the subject's erasure runs, the same audit rows.
Every operation runs through the single-request protocol (``write``/``read``/``delete``) —
a batch's lone sets through the write's fast path with their round trips shared
(``batch_sets``), a batch of one operation exactly as its single request — so every
invariant of those paths holds per item; a failed item does not fail the others.

Order: operations on one address (scope, scope ref, key) run one after another in request
order, in one worker; different addresses run concurrently on a bounded pool of workers,
each with its own session. So ``set k=1, get k, delete k`` in one batch reads 1, then
deletes; two operations on different addresses have no order between them.

Idempotency-Key covers the whole batch: each successful set or delete records its own
answer (under a key derived from the batch's key and the operation's index, fingerprinted
with the operation), in the write's own transaction for sets, so a retry answers those from
the first run and runs only what did not succeed. Gets are never recorded (no content is
ever kept in the control plane): a replay reads them again. Each recorded answer is a
pointer like a single write's, so an erasure forgets it as it forgets single writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from .. import idempotency
from ..addresses import MemoryAddress, Scope
from ..audit.service import audited
from ..db.engine import begin_write
from ..errors import DomainError, InvalidInput
from ..idempotency import Idempotency, Replay
from ..identity import Actor, Caller
from ..kit import sha256_hex
from ..plane.data_plane import DataPlane
from ..tenants.service import require_role
from . import batch_gets
from .batch_gets import GetItem, Looked
from .batch_sets import WRITER_ROLES, SetItem, commit_sets, failure, prepare_sets, side_by_side
from .delete import delete_value
from .read import get_value, read_found, read_logged
from .schemas import META_FIELDS, MemoryMeta, PointerOut, meta_of, pointer_json
from .shared import ensure_visible
from .write import set_value

log = logging.getLogger(__name__)

MAX_OPERATIONS = 1000


class BatchOperation(MemoryMeta):
    """One operation of a batch: ``set`` (with ``value`` and the metadata of a single
    write), ``get`` or ``delete`` (address only)."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["set", "get", "delete"] = Field(description="set, get or delete.")
    scope: Scope = Field(description="tenant, app, team, agent, user, conversation, entity, "
                         "project (institutional = tenant).")
    scope_ref: str = Field(description="Which user, conversation, agent …; '-' for tenant.")
    key: str = Field(description="The memory's key within the scope.")
    value: Any = Field(None, description="set only: any JSON value.")
    refresh_ttl: bool = Field(False, description="get only: restart the memory's ttl from "
                              "now (GET's refresh_ttl).")


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "operations": [
            {"op": "set", "scope": "user", "scope_ref": "u-42", "key": "lang",
             "value": "fr", "memory_type": "preference"},
            {"op": "get", "scope": "user", "scope_ref": "u-42", "key": "lang"},
            {"op": "delete", "scope": "conversation", "scope_ref": "c-7", "key": "draft"}]}]})

    operations: list[dict[str, Any]] = Field(
        ..., min_length=1, max_length=MAX_OPERATIONS,
        description=f"1 to {MAX_OPERATIONS} operations, each answered on its own: "
        "{op: set | get | delete, scope, scope_ref, key}; a set also takes value and the "
        "metadata of PUT /v1/memories/{scope}/{scope_ref}/{key} (memory_type, tags, "
        "importance, title, user_id, agent_id, ttl_days or ttl_seconds, source, "
        "searchable); a get also takes refresh_ttl. An operation that does not validate gets "
        "its own 422 result; the others still run.")


class BatchResult(BaseModel):
    index: int = Field(description="The operation's position in the request (from 0).")
    op: str = Field(description="set, get or delete (as sent; '' if it was not readable).")
    status: int = Field(description="The HTTP status the single request would have "
                        "answered: 200 (set, get), 204 (delete), 4xx/5xx on failure.")
    pointer: PointerOut | None = Field(None, description="set and get: the pointer.")
    value: Any = Field(None, description="get: the value, verified against its SHA-256 "
                       "(present, possibly null, only on a successful get).")
    error: str | None = Field(None, description="On failure: the error code.")
    detail: str | None = Field(None, description="On failure: what to fix.")


class BatchOut(BaseModel):
    results: list[BatchResult] = Field(description="One result per operation, in request "
                                       "order.")


@dataclass(frozen=True)
class _Op:
    index: int
    op: BatchOperation
    address: MemoryAddress
    fingerprint: str  # the operation as sent, for its idempotency record ("" without one)


@dataclass(frozen=True)
class BatchAnswer:
    results: list[dict[str, Any]]
    replayed: bool


def _describe(error: ValidationError) -> str:
    sentences = []
    for item in error.errors():
        where = ".".join(str(part) for part in item.get("loc", ()))
        if item.get("type") == "missing":
            sentences.append(f"{where}: this field is required")
        else:
            sentences.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
    return "; ".join(sentences)


def _parse(index: int, raw: dict[str, Any], *, idempotent: bool) -> _Op | dict[str, Any]:
    sent = raw.get("op")
    op_name = sent if isinstance(sent, str) else ""
    try:
        op = BatchOperation.model_validate(raw)
        if op.op == "set" and "value" not in op.model_fields_set:
            raise InvalidInput("value: this field is required for set")
        if op.refresh_ttl and op.op != "get":
            raise InvalidInput(f"refresh_ttl is for get only; leave it out of a {op.op}")
        if op.op != "set":
            extra = sorted((op.model_fields_set & META_FIELDS) | ({"value"} & op.model_fields_set))
            if extra:
                raise InvalidInput(f"{op.op} takes only op, scope, scope_ref and key; "
                                   f"leave out {', '.join(extra)}")
        address = MemoryAddress.parse(op.scope, op.scope_ref, op.key)
    except ValidationError as exc:
        return failure(index, op_name, InvalidInput(_describe(exc)))
    except DomainError as exc:
        return failure(index, op_name, exc)
    fingerprint = (sha256_hex(op.model_dump_json(exclude_unset=True).encode()) if idempotent
                   else "")
    return _Op(index, op, address, fingerprint)


def _item_key(batch: Idempotency, index: int) -> str:
    """Where an operation's own answer is kept: derived from the batch's key (any length)."""
    return f"batch:{sha256_hex(batch.key.encode())}:{index}"


def _run_one(session: Session, plane: DataPlane, caller: Caller, item: _Op,
             batch_idem: Idempotency | None, looked: Looked | None = None, *,
             logged: bool = False) -> dict[str, Any]:
    """One operation as its single request runs it; a get whose pointer the batch's shared
    lookup (``looked``) already read skips its own lookup (and, if that lookup appended its
    read row, ``logged``, its own success row)."""
    actor: Actor = caller.actor
    op = item.op
    head = {"index": item.index, "op": op.op}
    item_idem = None
    if batch_idem is not None:
        item_idem = Idempotency(_item_key(batch_idem, item.index), item.fingerprint)
    try:
        if op.op == "get":
            if looked is None:
                found = get_value(session, plane, actor, item.address, access=caller.access)
            else:
                with audited(session, actor, "read", detail=item.address.scope,
                             private=item.address.personal):
                    ensure_visible(session, actor, caller.access, item.address, "read")
                    reader = read_logged if logged else read_found
                    found = reader(session, plane, actor, item.address,
                                   looked.get(item.address))
            return head | {"status": 200, "value": found.value,
                           "pointer": pointer_json(found.pointer)}
        require_role(session, caller, WRITER_ROLES, "write memories")
        if op.op == "set":
            written = set_value(session, plane, actor, item.address, op.value, meta_of(op),
                                item_idem, access=caller.access)
            if isinstance(written, Replay):
                return head | {"status": written.status_code, "pointer": written.response}
            return head | {"status": 200, "pointer": pointer_json(written)}
        if item_idem is not None:
            replay = idempotency.find(session, actor, item_idem)
            session.commit()
            if replay is not None:
                return head | {"status": replay.status_code}
        delete_value(session, plane, actor, item.address, access=caller.access)
        if item_idem is not None:
            _remember(session, actor, item_idem, 204, {})
        return head | {"status": 204}
    except DomainError as exc:
        session.rollback()
        return failure(item.index, op.op, exc)
    except Exception:
        session.rollback()
        log.exception("batch operation %d (%s) failed unexpectedly", item.index, op.op)
        return head | {"status": 500, "error": "internal_error",
                       "detail": "this operation failed on the server; retry it, and report "
                                 "it if it keeps failing"}


def _remember(session: Session, actor: Actor, idem: Idempotency, status: int,
              response: dict[str, Any]) -> None:
    try:
        begin_write(session)
        idempotency.remember(session, actor, idem, status, response)
        session.commit()
    except sa_exc.IntegrityError:  # a twin batch recorded it first: same answer
        session.rollback()


def _groups(ops: Sequence[_Op]) -> list[list[_Op]]:
    """Operations on one address, in request order; the groups in order of first use."""
    by_address: dict[tuple[str, str, str | None], list[_Op]] = {}
    for item in ops:
        address = item.address
        by_address.setdefault((address.scope, address.scope_ref, address.key), []).append(item)
    return list(by_address.values())


def run_batch(sessions: Callable[[], Session], session: Session, plane: DataPlane,
              caller: Caller, operations: list[dict[str, Any]],
              idem: Idempotency | None) -> BatchAnswer:
    """Answer every operation (see the module docstring); ``session`` is the request's own,
    used for the batch's idempotency record; each worker opens its own from ``sessions``."""
    replayed = False
    if idem is not None:
        replayed = idempotency.find(session, caller.actor, idem) is not None
        session.commit()
    results: list[dict[str, Any] | None] = [None] * len(operations)
    valid: list[_Op] = []
    for index, raw in enumerate(operations):
        parsed = _parse(index, raw, idempotent=idem is not None)
        if isinstance(parsed, _Op):
            valid.append(parsed)
        else:
            results[index] = parsed

    if len(valid) == 1:
        # One operation is its single request, run here: the shared paths below would only
        # add their pool hop and set-wise statements around one row.
        with sessions() as own:
            results[valid[0].index] = _run_one(own, plane, caller, valid[0], idem)
        return _finish(session, caller, idem, replayed, results)

    # Every set alone at its address (and no Idempotency-Key) takes the batched path
    # (``batch_sets``): checks, one lookup for all, puts side by side, one transaction. Every
    # get alone at its address has its pointer read by one statement for all of them, is
    # fetched side by side, verified, and audited in one insert (``batch_gets``). Everything
    # else — and whatever those paths leave — runs the single-request protocol, one address
    # per worker, in request order.
    groups = _groups(valid)
    # A set's operation is its metadata (a BatchOperation is a MemoryMeta with the same
    # fields validated): the batched path only reads them, so no copy is made.
    sets = [SetItem(g[0].index, g[0].address, g[0].op.value, g[0].op)
            for g in groups if idem is None and len(g) == 1 and g[0].op.op == "set"]
    gets = [GetItem(g[0].index, g[0].address) for g in groups
            if len(g) == 1 and g[0].op.op == "get"
            and caller.access.allows(g[0].address.scope, g[0].address.scope_ref)]
    looked, logged = batch_gets.lookup(session, plane, caller.actor, gets)
    looked_up = {item.address for item in gets}
    batched = {item.index for item in sets} | {item.index for item in gets}
    by_index = {item.index: item for item in valid}

    def work(group: list[_Op]) -> list[dict[str, Any]]:
        with sessions() as own:
            if len(group) == 1 and group[0].op.op == "get" and group[0].address in looked_up:
                return [_run_one(own, plane, caller, group[0], idem, looked,
                                 logged=group[0].address in logged)]
            return [_run_one(own, plane, caller, item, idem) for item in group]

    def run(groups: list[list[_Op]]) -> None:
        for answers in side_by_side(plane, caller.actor.tenant_id, work, groups):
            for answer in answers:
                results[answer["index"]] = answer

    if sets:
        prepared, refused, general = prepare_sets(session, plane, caller, sets)
        for index, answer in refused.items():
            results[index] = answer
        if prepared:
            answers, retry = commit_sets(session, plane, caller, prepared)
            for index, answer in answers.items():
                results[index] = answer
            general += retry
        run([[by_index[item.index]] for item in general])
    if gets:
        read, unread = batch_gets.read_gets(session, plane, caller.actor, gets, looked, logged)
        for index, answer in read.items():
            results[index] = answer
        run([[by_index[item.index]] for item in unread])
    run([g for g in groups if g[0].index not in batched])
    return _finish(session, caller, idem, replayed, results)


def _finish(session: Session, caller: Caller, idem: Idempotency | None, replayed: bool,
            results: list[dict[str, Any] | None]) -> BatchAnswer:
    if idem is not None and not replayed:
        _remember(session, caller.actor, idem, 200, {"batch": len(results)})
    return BatchAnswer([r for r in results if r is not None], replayed)
