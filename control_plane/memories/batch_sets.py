"""A batch's sets, side by side: the single write's fast path (``write_fast.prepare_fast``
then ``hotpath_commit.commit_writes``) with its per-item round trips gathered.

For every set alone at its address the checks run in the request's thread (role, scoped
key, agent, size, target: the single request's sentences and failure audit rows), then ONE
lookup reads every pointer id, subject key and erasure guard, the sealed puts
run concurrently on a pool shared by all batches (or, for a bucket that stores many
objects together, in one ``put_many`` call), and ONE transaction moves every pointer
and appends every audit row (``commit_sets``). Each item still passes each step the single
request passes, in the same order — checkpoints included — so every invariant of the write
protocol holds per item; only the round trips are shared.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..addresses import MemoryAddress
from ..audit import service as audit
from ..audit.service import audited
from ..dlp.guard import screen_memory
from ..errors import DomainError
from ..identity import Caller
from ..plane.data_plane import DataPlane, Target, storage_errors
from ..plane.shared_pool import SharedPool
from ..tenants.service import require_role
from . import hotpath, hotpath_commit
from .api import check_size, delete_quietly, serialise
from .schemas import MemoryMeta, pointer_json
from .shared import ensure_in_scope, remember_key
from .write import as_agent
from .write_fast import bind_fast, put_fast, request_fast, seal_fast, settle_fast
from .write_request import WriteRequest

log = logging.getLogger(__name__)

WORKERS = 16
WRITER_ROLES = ("admin", "agent")

# One pool for every batch of the process: starting threads per batch cost more than the
# puts of a small one. A tenant's tasks take at most half of it, and never queue behind
# another tenant's (plane/shared_pool.py); they never wait on the pool themselves.
_pool = SharedPool(WORKERS, "memplane-batch")
T = TypeVar("T")
R = TypeVar("R")


def side_by_side(plane: DataPlane, tenant_id: uuid.UUID, task: Callable[[T], R],
                 items: list[T]) -> list[R]:
    """``task`` over ``items`` on the shared pool, answers in order; each call sees the
    caller's context variables (the request id its audit rows carry)."""
    if len(items) <= 1:
        return [task(item) for item in items]
    context = contextvars.copy_context()
    return _pool.map(tenant_id, plane.bulkheads,
                     lambda item: context.copy().run(task, item), items)


# Buckets whose reads are a local file's or memory's, with no network to wait on: a
# request's few objects are read one after another in its own thread, since handing them to
# the pool costs more than the reads (about 0.4 ms of hand-offs for four small objects).
_NEAR = frozenset({"file", "memory"})


def all_near(adapters: Iterable[Any]) -> bool:
    """Whether every bucket among ``adapters`` is near (``_NEAR``)."""
    return all(getattr(adapter, "scheme", None) in _NEAR for adapter in adapters)


def fetch_all(plane: DataPlane, tenant_id: uuid.UUID, fetch: Callable[[T], R], items: list[T],
              adapters: Iterable[Any]) -> list[R]:
    """``fetch`` over ``items``, answers in order: side by side on the shared pool, or in
    this thread when every bucket among ``adapters`` is near (``all_near``)."""
    if all_near(adapters):
        return [fetch(item) for item in items]
    return side_by_side(plane, tenant_id, fetch, items)


@dataclass(frozen=True)
class SetItem:
    """A set of a batch: its position, address, value and metadata as sent."""

    index: int
    address: MemoryAddress
    value: Any
    meta: MemoryMeta


@dataclass(frozen=True)
class Prepared:
    """A set whose object is stored and whose pointer row waits for the batch's commit."""

    item: SetItem
    target: Target
    request: WriteRequest


@dataclass(frozen=True)
class _Checked:
    item: SetItem
    meta: MemoryMeta  # as the caller may write it (agent keys fill agent_id in)
    payload: bytes
    target: Target


def failure(index: int, op: str, exc: DomainError) -> dict[str, Any]:
    return {"index": index, "op": op, "status": exc.status_code, **exc.body()}


def _audit_failure(session: Session, caller: Caller, item: SetItem, meta: MemoryMeta,
                   exc: Exception) -> None:
    """The failure row the single request's ``audited`` block records for ``exc``."""
    try:
        with audited(session, caller.actor, "write", detail=item.address.scope,
                     private=(*item.address.personal, meta.user_id)):
            raise exc
    except Exception:
        session.rollback()


def prepare_sets(session: Session, plane: DataPlane, caller: Caller, items: list[SetItem]
                 ) -> tuple[list[Prepared], dict[int, dict[str, Any]], list[SetItem]]:
    """Steps 1–2 of every set: the prepared ones, the refused ones' answers by index, and the
    ones the single-request protocol must run (their subject has no key yet)."""
    actor = caller.actor
    answers: dict[int, dict[str, Any]] = {}
    checked: list[_Checked] = []
    for item in items:
        address, meta = item.address, item.meta
        try:
            require_role(session, caller, WRITER_ROLES, "write memories")
            with audited(session, actor, "write", detail=address.scope,
                         private=(*address.personal, meta.user_id)):
                ensure_in_scope(session, actor, caller.access, address, "write")
                meta = as_agent(caller.access, meta)
                value, meta = screen_memory(session, actor, item.value, meta)
                payload = serialise(value)
                check_size(plane, len(payload))
                target = plane.for_memory(session, actor.tenant_id, address.scope,
                                          meta.agent_id, meta.user_id)
        except DomainError as exc:
            session.rollback()
            answers[item.index] = failure(item.index, "set", exc)
            continue
        checked.append(_Checked(item, meta, payload, target))
    found = hotpath.lookup_many_for_write(session, actor.tenant_id,
                                          [(c.item.address, c.meta.user_id) for c in checked])
    bound = []
    general: list[SetItem] = []
    for one, lookup in zip(checked, found, strict=True):
        try:
            binding = bind_fast(session, plane, actor, lookup)
        except DomainError as exc:  # the subject's erasure runs: 409, audited
            _audit_failure(session, caller, one.item, one.meta, exc)
            answers[one.item.index] = failure(one.item.index, "set", exc)
            continue
        if binding is None:
            general.append(one.item)
        else:
            bound.append((one, lookup, binding))
            remember_key(actor.tenant_id, one.item.address,
                         binding.key.id if binding.key is not None else None)
    session.commit()

    prepared: list[Prepared] = []
    for (one, _, _), outcome in zip(bound, _store(plane, actor, bound), strict=True):
        if isinstance(outcome, Prepared):
            prepared.append(outcome)
            continue
        _audit_failure(session, caller, one.item, one.meta, outcome)
        if not isinstance(outcome, DomainError):
            raise outcome
        answers[one.item.index] = failure(one.item.index, "set", outcome)
    return prepared, answers, general


_Bound = tuple[_Checked, hotpath.WriteLookup, Any]


def _store(plane: DataPlane, actor: Any, bound: list[_Bound]) -> list[Prepared | Exception]:
    """Step 2 of every bound set, answers in order (an exception is answered, and audited,
    in the request's thread): objects bound for a bucket that stores many together
    (``put_many``: a local directory, made durable by one flush) go in one call per
    bucket; the others are put side by side on the shared pool."""
    outcomes: list[Prepared | Exception | None] = [None] * len(bound)
    together: dict[int, list[int]] = {}
    alone: list[int] = []
    # One protocol check per bucket, not per item (a runtime protocol check reads the
    # class's members each time: ~10 us).
    stores_many: dict[int, bool] = {}
    for n, (one, _, _) in enumerate(bound):
        adapter = one.target.adapter
        if id(adapter) not in stores_many:
            stores_many[id(adapter)] = isinstance(adapter, storage.BatchAdapter)
        if stores_many[id(adapter)]:
            together.setdefault(id(adapter), []).append(n)
        else:
            alone.append(n)

    def put(entry: _Bound) -> Prepared | Exception:
        one, lookup, binding = entry
        try:
            return Prepared(one.item, one.target, put_fast(
                plane, one.target, actor, one.item.address, one.payload, one.meta, lookup,
                binding))
        except Exception as exc:
            return exc

    puts = side_by_side(plane, actor.tenant_id, put, [bound[n] for n in alone])
    for n, outcome in zip(alone, puts, strict=True):
        outcomes[n] = outcome
    for positions in together.values():
        sealed: dict[int, tuple[str, bytes]] = {}
        for n in positions:
            one, _, binding = bound[n]
            try:
                sealed[n] = seal_fast(plane, one.target, actor, one.item.address, one.payload,
                                      binding)
            except Exception as exc:
                outcomes[n] = exc
        if not sealed:
            continue
        adapter = bound[positions[0]][0].target.adapter
        assert isinstance(adapter, storage.BatchAdapter)
        stored: list[Exception | None]
        try:
            stored = list(adapter.put_many(list(sealed.values())))
        except Exception as exc:
            stored = [exc] * len(sealed)
        for n, error in zip(sealed, stored, strict=True):
            one, lookup, binding = bound[n]
            try:
                if error is not None:
                    with storage_errors():
                        raise error
                outcomes[n] = Prepared(one.item, one.target, request_fast(
                    plane, one.target, actor, one.item.address, one.payload, one.meta, lookup,
                    binding, sealed[n][0]))
            except Exception as exc:
                outcomes[n] = exc
    return [o if o is not None else RuntimeError("a set was neither stored nor refused")
            for o in outcomes]


def commit_sets(session: Session, plane: DataPlane, caller: Caller, prepared: list[Prepared]
                ) -> tuple[dict[int, dict[str, Any]], list[SetItem]]:
    """Step 3 for every prepared set in one transaction (``hotpath_commit.commit_writes``); the
    answers by index, and the items the general path must still run (their row changed)."""
    answers: dict[int, dict[str, Any]] = {}
    retry: list[SetItem] = []
    try:
        plane.checkpoint("write:before_commit")
        outcomes = hotpath_commit.commit_writes(session, [p.request for p in prepared])
    except sa_exc.OperationalError:
        # The commit may have landed: the objects stay (a pointer may name them; GC
        # removes them if not). Every item answers what the single request would.
        session.rollback()
        return {p.item.index: _failed_commit(session, caller, p, "database_unavailable",
                                             "the control-plane database is unreachable; "
                                             "retry later", 503) for p in prepared}, []
    except Exception:
        session.rollback()
        log.exception("a batch's pointer transaction failed")
        for p in prepared:
            delete_quietly(p.target, [p.request.path])
        return {p.item.index: _failed_commit(session, caller, p, "internal_error",
                                             "the batch's pointer transaction failed; retry "
                                             "this operation", 500) for p in prepared}, []
    superseded: list[tuple[Any, str]] = []
    for p, outcome in zip(prepared, outcomes, strict=True):
        head = {"index": p.item.index, "op": "set"}
        try:
            saved = settle_fast(p.target, p.request, outcome)
        except DomainError as exc:  # the erasure guard, checked again in the statement
            audit.record_failure(session, caller.actor, "write",
                                 detail=f"{p.item.address.scope} {exc.code}: {exc.detail}")
            answers[p.item.index] = failure(p.item.index, "set", exc)
            continue
        if saved is None:
            retry.append(p.item)
            continue
        pointer, old = saved
        if old is not None:
            superseded.append(old)
        answers[p.item.index] = head | {"status": 200, "pointer": pointer_json(pointer)}
    plane.checkpoint("write:after_commit")
    by_config: dict[Any, list[str]] = {}
    for config, path in superseded:
        by_config.setdefault(config, []).append(path)
    for config, paths in by_config.items():  # step 4: best effort; orphan GC finishes
        delete_quietly(plane.by_id(session, config), paths)
    session.rollback()
    return answers, retry


def _failed_commit(session: Session, caller: Caller, p: Prepared, code: str, detail: str,
                   status: int) -> dict[str, Any]:
    try:
        audit.record_failure(session, caller.actor, "write",
                             detail=f"{p.item.address.scope} error: {code}")
    except Exception:  # the database may be what failed; the answer matters more
        log.warning("could not audit a failed batch write")
    return {"index": p.item.index, "op": "set", "status": status, "error": code,
            "detail": detail}
