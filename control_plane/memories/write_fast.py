"""Memories by key, the write protocol's fast path (DESIGN §4): the general path's steps in
as few statements as the database allows (``hotpath``, ``hotpath_commit``).

  1. one statement looks up the pointer's id, its subject's live key and the erasure guard
     (``hotpath.lookup_for_write``) — or none, when ``guesses`` knows what it would find;
  2. the sealed put (``put_fast``: ``seal_fast`` then ``request_fast``; no session needed,
     so a batch runs it on worker threads);
  3. one statement (PostgreSQL) or one short transaction (SQLite) moves the pointer and
     appends its audit row (``hotpath_commit.commit_write``); ``settle_fast`` reads its
     outcome.
Whatever it cannot settle, it answers None for, and the general path (``write_general``)
takes over.
"""

from __future__ import annotations

import uuid

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from ..addresses import DEFAULT_MEMORY_TYPES, MemoryAddress
from ..db.base import new_id, utcnow
from ..db.models import MemoryPointer
from ..holds.guard import erasure_in_progress
from ..identity import Actor
from ..keys import subject_keys as keys
from ..kit import request_id_var, sha256_hex
from ..plane.data_plane import DataPlane, Target, storage_errors
from . import guesses, hotpath, hotpath_commit
from .api import delete_quietly
from .schemas import MemoryMeta
from .sealing import Binding, seal
from .shared import keyring_of, remember_key, sealed_address, subject_after_write
from .write_request import WriteRequest


def write_fast(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
               payload: bytes, meta: MemoryMeta
               ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """The write protocol in two statements (``hotpath``), or in one when what the lookup
    would find can be guessed (``guesses``). None when the fast path cannot settle it — the
    subject has no key yet, or the row changed since the lookup — and the general protocol
    (``write_general``) must."""
    target = plane.for_memory(session, actor.tenant_id, address.scope, meta.agent_id,
                              meta.user_id)
    guessed = _prepare_guessed(session, plane, actor, address, target, payload, meta)
    if guessed is not None:
        request, subject = guessed
        settled = _commit_fast(session, plane, target, request)
        if settled is not None:
            return settled
        guesses.forget(actor.tenant_id, address, subject)
    looked = prepare_fast(session, plane, actor, address, target, payload, meta)
    if looked is None:
        return None
    return _commit_fast(session, plane, target, looked)


def _commit_fast(session: Session, plane: DataPlane, target: Target, request: WriteRequest
                 ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """Step 3 of the fast path, and what it settles (``settle_fast``)."""
    try:
        plane.checkpoint("write:before_commit")
        outcome = hotpath_commit.commit_write(session, request)
    except sa_exc.OperationalError:
        session.rollback()
        raise  # keep the object: the statement may have committed before the connection died
    except Exception:
        session.rollback()
        delete_quietly(target, [request.path])
        raise
    settled = settle_fast(target, request, outcome)
    if settled is not None:
        guesses.saw_row(request.tenant_id, request.address, settled[0].id,
                        settled[0].subject_user_id)
    return settled


def _prepare_guessed(session: Session, plane: DataPlane, actor: Actor,
                     address: MemoryAddress, target: Target, payload: bytes, meta: MemoryMeta
                     ) -> tuple[WriteRequest, tuple[str, str]] | None:
    """Step 2 of the fast path without step 1: the put to ``target``, sealed for what the
    lookup is guessed to find (``guesses``), which step 3 checks. None: no guess to take."""
    if session.in_transaction():
        session.commit()
    ring = keyring_of(plane)
    taken = guesses.guess(actor.tenant_id, address, meta.user_id, encrypted=ring.enabled,
                          cheap_puts=getattr(target.adapter, "cheap_puts", False))
    if taken is None:
        return None
    found, subject, key_id = taken
    key = None
    if key_id is not None:
        raw = ring.cache.get(key_id)
        if raw is None:  # not unwrapped here lately (or forgotten by an erasure)
            return None
        key = keys.SubjectKeyHandle(key_id, *subject, raw)
    binding = Binding(found.pointer_id or new_id(), key)
    remember_key(actor.tenant_id, address, key_id)
    return put_fast(plane, target, actor, address, payload, meta, found, binding), subject


def prepare_fast(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                 target: Target, payload: bytes, meta: MemoryMeta) -> WriteRequest | None:
    """Steps 1–2 of the fast path: the one-statement lookup, then the put to ``target``;
    what step 3 (``hotpath_commit.commit_write``) needs. None: take the general path."""
    found = hotpath.lookup_for_write(session, actor.tenant_id, address, meta.user_id)
    bound = bind_fast(session, plane, actor, found)
    session.commit()
    if bound is None:
        return None
    remember_key(actor.tenant_id, address, bound.key.id if bound.key is not None else None)
    if bound.key is not None:
        guesses.saw_key(actor.tenant_id, bound.key.subject, bound.key.id)
    if found.pointer_id is not None:
        guesses.saw_row(actor.tenant_id, address, found.pointer_id, found.subject_user_id)
    return put_fast(plane, target, actor, address, payload, meta, found, bound)


def bind_fast(session: Session, plane: DataPlane, actor: Actor,
              found: hotpath.WriteLookup) -> Binding | None:
    """After the lookup: the pointer id and unwrapped subject key the object is sealed for;
    409 while an erasure of the subject runs; None when the subject has no key yet (the
    general path creates it)."""
    if found.blocked_by is not None:
        raise erasure_in_progress(found.blocked_by)
    pointer_id = found.pointer_id or new_id()
    ring = keyring_of(plane)
    if not ring.enabled:
        return Binding(pointer_id, None)
    if found.key is None or found.key.wrapped_key is None:
        return None
    return Binding(pointer_id, keys.handle_of(
        session, ring, actor.tenant_id, found.key.id,
        (found.key.scope_type, found.key.scope_ref), found.key.wrapped_key,
        found.key.kek_version_id))


def put_fast(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
             payload: bytes, meta: MemoryMeta, found: hotpath.WriteLookup,
             binding: Binding) -> WriteRequest:
    """Step 2 of the fast path (needs no session: a batch runs it on worker threads): the
    sealed put, and the request step 3 commits."""
    path, blob = seal_fast(plane, target, actor, address, payload, binding)
    with storage_errors():
        target.adapter.put(path, blob)
    return request_fast(plane, target, actor, address, payload, meta, found, binding, path)


def seal_fast(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
              payload: bytes, binding: Binding) -> tuple[str, bytes]:
    """The first half of ``put_fast``: the object's fresh path and its sealed bytes (a batch
    then stores many of them together, ``LocalAdapter.put_many``)."""
    plane.checkpoint("write:after_lookup")  # race tests: the lookup is done, the put is not
    return seal(plane, target, actor, address, payload, binding)


def request_fast(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
                 payload: bytes, meta: MemoryMeta, found: hotpath.WriteLookup,
                 binding: Binding, path: str) -> WriteRequest:
    """The second half of ``put_fast``, once the object at ``path`` is stored: the request
    step 3 commits."""
    pointer_id, handle = binding.pointer_id, binding.key
    now = utcnow()
    subject_user = subject_after_write(address, meta.user_id, found.pointer_id is not None,
                                       found.subject_user_id)
    request = WriteRequest(
        tenant_id=actor.tenant_id, address=address, pointer_id=pointer_id,
        seen_subject_user=found.subject_user_id, guard_user=subject_user,
        config_id=target.config_id, path=path, sha256=sha256_hex(payload), size=len(payload),
        now=now, memory_type=meta.memory_type,
        default_memory_type=DEFAULT_MEMORY_TYPES.get(address.scope, "fact"),
        tags=list(dict.fromkeys(meta.tags)) if meta.tags is not None else None,
        importance=meta.importance, title=meta.title, meta_user=meta.user_id,
        agent_id=meta.agent_id,
        expires_at=now + ttl if (ttl := meta.ttl()) is not None else None,
        accessor_type=actor.accessor_type, accessor_id=actor.accessor_id, operation="write",
        request_id=request_id_var.get(), accessor_agent_id=actor.agent_id,
        audit_address=sealed_address(actor, address, handle),
        key_id=handle.id if handle is not None else None, source=meta.source,
        searchable=meta.searchable, existed=found.pointer_id is not None,
    )
    plane.checkpoint("write:after_put")
    return request


def settle_fast(target: Target, request: WriteRequest, outcome: hotpath_commit.WriteOutcome
                ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """After step 3: the saved pointer and what it superseded; else the unadopted object
    goes, and an erasure's guard answers 409 (None: take the general path)."""
    if outcome.pointer is None:
        delete_quietly(target, [request.path])
        if outcome.blocked_by is not None:
            raise erasure_in_progress(outcome.blocked_by)
        return None
    return outcome.pointer, outcome.superseded

