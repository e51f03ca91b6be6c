"""Memories by key, the write protocol (DESIGN §4): object first, then the pointer.

  1. serialise the value, hash the plaintext;
  2. put the bytes at a fresh per-version path, create-only (no transaction is open);
  3. one transaction: lock the pointer row, point it at the new object as ``synced``,
     bump ``version``, append the audit row, commit — only then does the API answer 2xx;
  4. after the commit, delete the superseded object (best effort; orphan GC finishes).
A crash between 2 and 3 leaves an orphan object that no pointer names, which GC removes.

The protocol commits at the steps named above, because the bucket is not part of the
database transaction.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import idempotency
from ..audit import service as audit
from ..audit.service import Actor, audited
from ..compliance.guard import ensure_writable, erasure_in_progress
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer, SubjectKey
from ..errors import Conflict, Forbidden, InvalidInput, PayloadTooLarge
from ..idempotency import Idempotency, Replay
from ..keys import subject_keys as keys
from ..kit import request_id_var, sha256_hex
from ..plane.data_plane import DataPlane, Target, storage_errors
from ..tenants.access import EVERYTHING, Access
from . import guesses, hotpath
from . import repository as repo
from .addresses import DEFAULT_MEMORY_TYPES, MemoryAddress
from .read import fetch_locked
from .schemas import MemoryMeta, pointer_json
from .shared import (
    CommitUncertain,
    delete_quietly,
    ensure_visible,
    expired,
    keyring_of,
    remember_key,
    sealed_address,
    subject_after_write,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Binding:
    """What a new object is sealed for: the pointer id in its associated data, and the
    subject key (None while encryption is off). Both are known before the put."""

    pointer_id: uuid.UUID
    key: keys.SubjectKeyHandle | None



class _Rebind(Exception):
    """The locked row is not what the object was sealed for (a concurrent first write made
    the row with another id, or the data subject changed): seal the object again."""


# json.dumps with these settings builds an encoder per call; one, kept, writes the same text.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def serialise(value: Any) -> bytes:
    try:
        return _ENCODER.encode(value).encode()
    except ValueError as exc:
        raise InvalidInput(f"value is not valid JSON: {exc}") from None


def _as_agent(access: Access, meta: MemoryMeta) -> MemoryMeta:
    """A key with an agent id writes as that agent: it fills ``agent_id`` in, and a body
    naming another agent is refused."""
    if access.agent_id is None or meta.agent_id == access.agent_id:
        return meta
    if meta.agent_id is None:
        return meta.model_copy(update={"agent_id": access.agent_id})
    raise Forbidden(f"this key writes as agent {access.agent_id!r}; leave agent_id out or "
                    f"send that one")


def _check_size(plane: DataPlane, size: int) -> None:
    """Refuse (413) a value that would be stored larger than MEMPLANE_MAX_OBJECT_BYTES."""
    limit = plane.max_object_bytes
    if limit is not None and size > limit:
        raise PayloadTooLarge(
            f"the stored value would be {size} bytes, over this server's limit of {limit} bytes "
            "per memory (MEMPLANE_MAX_OBJECT_BYTES); keep the value smaller, or start a new "
            "key instead of appending to this one"
        )


def set_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
              value: Any, meta: MemoryMeta, idem: Idempotency | None = None, *,
              access: Access = EVERYTHING) -> MemoryPointer | Replay:
    """Store ``value`` at the address, replacing what was there (last writer wins)."""
    with audited(session, actor, "write", detail=address.scope,
                 private=(*address.personal, meta.user_id)):
        ensure_visible(session, actor, access, address, "write")
        meta = _as_agent(access, meta)
        replay = _replay(session, actor, idem)
        if replay is not None:
            return replay
        try:
            payload = serialise(value)
            _check_size(plane, len(payload))
            return _write(session, plane, actor, address, payload, meta, idem)
        except sa_exc.IntegrityError:
            return _replay_after_race(session, actor, idem)


def append_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                 item: Any, meta: MemoryMeta, idem: Idempotency | None = None, *,
                 access: Access = EVERYTHING) -> MemoryPointer | Replay:
    """Append ``item`` to the JSON list at the address, creating it if absent.

    Concurrent appends to one key never lose an item: each holds the pointer's row lock
    from reading the list until the new version is committed, so they take turns.
    """
    with audited(session, actor, "append", detail=address.scope,
                 private=(*address.personal, meta.user_id)):
        ensure_visible(session, actor, access, address, "append")
        meta = _as_agent(access, meta)
        replay = _replay(session, actor, idem)
        if replay is not None:
            return replay
        item_bytes = serialise(item)
        for attempt in range(1, 5):
            target = plane.for_memory(session, actor.tenant_id, address.scope, meta.agent_id,
                                      meta.user_id)
            binding = _bind(session, plane, actor, address, meta,
                            repo.get(session, actor.tenant_id, address))
            session.commit()
            begin_write(session)
            pointer = repo.lock(session, actor.tenant_id, address)
            if not _binds(binding, address, meta, pointer):
                session.rollback()  # the row changed since the key lookup (rare): look again
                continue
            items: list[Any] = []
            if pointer is not None and expired(pointer):
                # Its ttl_days ran out: the old items are not read back into the new list
                # (that would serve them again); the list starts afresh, without the old
                # expiry.
                pointer.expires_at = None
            elif pointer is not None and pointer.sync_status != "pending_delete":
                # Refuse before fetching the list: it grows by the item and a comma ("[]" by
                # the item alone), so its new size is known without reading it.
                comma = 1 if pointer.content_size > 2 else 0
                _check_size(plane, pointer.content_size + comma + len(item_bytes))
                stored = fetch_locked(session, plane, actor, pointer)
                if not isinstance(stored, list):
                    raise Conflict(
                        "the value stored at this key is not a list, so nothing can be "
                        "appended to it; use set to replace it"
                    )
                items = stored
            items.append(item)
            payload = serialise(items)
            _check_size(plane, len(payload))
            path = _put(plane, target, actor, address, payload, binding)
            try:
                saved = _save(session, plane, target, actor, address, pointer, path,
                              payload, meta, "append", idem, binding)
            except sa_exc.IntegrityError:
                # Another first append created the row, or a twin request took the
                # idempotency key; start over against it.
                session.rollback()
                delete_quietly(target, [path])
                if attempt >= 2:
                    return _replay_after_race(session, actor, idem)
                replay = _replay(session, actor, idem)
                if replay is not None:
                    return replay
                continue
            except CommitUncertain as exc:
                session.rollback()
                raise exc.original from None  # keep the object: the commit may have landed
            except Exception:
                session.rollback()
                delete_quietly(target, [path])
                raise
            return _after_commit(session, plane, saved)
        raise Conflict("the memory kept changing while it was being appended to; retry")


def _replay(session: Session, actor: Actor, idem: Idempotency | None) -> Replay | None:
    if idem is None:
        return None
    replay = idempotency.find(session, actor, idem)
    if replay is not None:
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "replay", pointer_id=uuid.UUID(replay.response["id"]),
                     detail="idempotency key answered from the first request")
        session.commit()
    return replay


def _replay_after_race(session: Session, actor: Actor, idem: Idempotency | None) -> Replay:
    """A twin request with the same key committed first; answer with its result."""
    session.rollback()
    replay = _replay(session, actor, idem)
    if replay is None:
        raise Conflict("the memory was written concurrently by another request; retry")
    return replay


def _write(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
           payload: bytes, meta: MemoryMeta, idem: Idempotency | None) -> MemoryPointer:
    if idem is None:
        fast = _write_fast(session, plane, actor, address, payload, meta)
        if fast is not None:
            return _after_commit(session, plane, fast)
    target = plane.for_memory(session, actor.tenant_id, address.scope, meta.agent_id,
                              meta.user_id)
    binding = _bind(session, plane, actor, address, meta,
                    repo.get(session, actor.tenant_id, address))
    # No transaction may stay open across bucket I/O.
    session.commit()
    plane.checkpoint("write:after_lookup")
    path = _put(plane, target, actor, address, payload, binding)
    try:
        for attempt in range(1, 4):
            begin_write(session)
            pointer = repo.lock(session, actor.tenant_id, address)
            try:
                saved = _save(session, plane, target, actor, address, pointer, path,
                              payload, meta, "write", idem, binding)
                break
            except sa_exc.IntegrityError:
                # Another writer created the row first; take the update path against it.
                session.rollback()
                if attempt == 3:
                    raise
            except _Rebind:
                # Sealed for a pointer id or subject the row no longer has: seal it again.
                session.rollback()
                delete_quietly(target, [path])
                if attempt == 3:
                    raise Conflict("the memory kept changing while it was being written; "
                                   "retry") from None
                binding = _bind(session, plane, actor, address, meta,
                                repo.get(session, actor.tenant_id, address))
                session.commit()
                path = _put(plane, target, actor, address, payload, binding)
    except CommitUncertain as exc:
        session.rollback()
        raise exc.original from None  # keep the object: the commit may have landed
    except Exception:  # the new object is an orphan now; remove it rather than wait for GC
        session.rollback()
        delete_quietly(target, [path])
        raise
    guesses.saw_row(actor.tenant_id, address, saved[0].id, saved[0].subject_user_id)
    if binding.key is not None:
        guesses.saw_key(actor.tenant_id, binding.key.subject, binding.key.id)
    return _after_commit(session, plane, saved)


def _write_fast(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                payload: bytes, meta: MemoryMeta
                ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """The write protocol in two statements (``hotpath``), or in one when what the lookup
    would find can be guessed (``guesses``). None when the fast path cannot settle it — the
    subject has no key yet, or the row changed since the lookup — and the general protocol
    below must."""
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


def _commit_fast(session: Session, plane: DataPlane, target: Target,
                 request: hotpath.WriteRequest
                 ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """Step 3 of the fast path, and what it settles (``settle_fast``)."""
    try:
        plane.checkpoint("write:before_commit")
        outcome = hotpath.commit_write(session, request)
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
                     ) -> tuple[hotpath.WriteRequest, tuple[str, str]] | None:
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
        key = keys.SubjectKeyHandle(key_id, subject[0], subject[1], raw)
    binding = _Binding(found.pointer_id or new_id(), key)
    remember_key(actor.tenant_id, address, key_id)
    return put_fast(plane, target, actor, address, payload, meta, found, binding), subject


def prepare_fast(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                 target: Target, payload: bytes, meta: MemoryMeta
                 ) -> hotpath.WriteRequest | None:
    """Steps 1–2 of the fast path: the one-statement lookup, then the put to ``target``;
    what step 3 (``hotpath.commit_write``) needs. None: take the general path."""
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
              found: hotpath.WriteLookup) -> _Binding | None:
    """After the lookup: the pointer id and unwrapped subject key the object is sealed for;
    409 while an erasure of the subject runs; None when the subject has no key yet (the
    general path creates it)."""
    if found.blocked_by is not None:
        raise erasure_in_progress(found.blocked_by)
    pointer_id = found.pointer_id or new_id()
    ring = keyring_of(plane)
    if not ring.enabled:
        return _Binding(pointer_id, None)
    if found.key is None or found.key.wrapped_key is None:
        return None
    return _Binding(pointer_id, keys.handle_of(
        session, ring, actor.tenant_id, found.key.id,
        (found.key.scope_type, found.key.scope_ref), found.key.wrapped_key,
        found.key.kek_version_id))


def put_fast(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
             payload: bytes, meta: MemoryMeta, found: hotpath.WriteLookup,
             binding: _Binding) -> hotpath.WriteRequest:
    """Step 2 of the fast path (needs no session: a batch runs it on worker threads): the
    sealed put, and the request step 3 commits."""
    path, blob = seal_fast(plane, target, actor, address, payload, binding)
    with storage_errors():
        target.adapter.put(path, blob)
    return request_fast(plane, target, actor, address, payload, meta, found, binding, path)


def seal_fast(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
              payload: bytes, binding: _Binding) -> tuple[str, bytes]:
    """The first half of ``put_fast``: the object's fresh path and its sealed bytes (a batch
    then stores many of them together, ``LocalAdapter.put_many``)."""
    plane.checkpoint("write:after_lookup")  # race tests: the lookup is done, the put is not
    return _seal(plane, target, actor, address, payload, binding)


def request_fast(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
                 payload: bytes, meta: MemoryMeta, found: hotpath.WriteLookup,
                 binding: _Binding, path: str) -> hotpath.WriteRequest:
    """The second half of ``put_fast``, once the object at ``path`` is stored: the request
    step 3 commits."""
    pointer_id, handle = binding.pointer_id, binding.key
    now = utcnow()
    subject_user = subject_after_write(address, meta.user_id, found.pointer_id is not None,
                                       found.subject_user_id)
    request = hotpath.WriteRequest(
        tenant_id=actor.tenant_id, address=address, pointer_id=pointer_id,
        seen_subject_user=found.subject_user_id, guard_user=subject_user,
        config_id=target.config_id, path=path, sha256=sha256_hex(payload), size=len(payload),
        now=now, memory_type=meta.memory_type,
        default_memory_type=DEFAULT_MEMORY_TYPES.get(address.scope, "fact"),
        tags=list(dict.fromkeys(meta.tags)) if meta.tags is not None else None,
        importance=meta.importance, title=meta.title, meta_user=meta.user_id,
        agent_id=meta.agent_id,
        expires_at=now + timedelta(days=meta.ttl_days) if meta.ttl_days is not None else None,
        accessor_type=actor.accessor_type, accessor_id=actor.accessor_id, operation="write",
        request_id=request_id_var.get(), accessor_agent_id=actor.agent_id,
        audit_address=sealed_address(actor, address, handle),
        key_id=handle.id if handle is not None else None, source=meta.source,
        searchable=meta.searchable, existed=found.pointer_id is not None,
    )
    plane.checkpoint("write:after_put")
    return request


def settle_fast(target: Target, request: hotpath.WriteRequest, outcome: hotpath.WriteOutcome
                ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """After step 3: the saved pointer and what it superseded; else the unadopted object
    goes, and an erasure's guard answers 409 (None: take the general path)."""
    if outcome.pointer is None:
        delete_quietly(target, [request.path])
        if outcome.blocked_by is not None:
            raise erasure_in_progress(outcome.blocked_by)
        return None
    return outcome.pointer, outcome.superseded


def _subject_user(address: MemoryAddress, meta: MemoryMeta,
                  pointer: MemoryPointer | None) -> str | None:
    """The pointer's data subject once this write is saved (mirrors ``_save``)."""
    return subject_after_write(address, meta.user_id, pointer is not None,
                               pointer.subject_user_id if pointer is not None else None)


def _bind(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
          meta: MemoryMeta, pointer: MemoryPointer | None) -> _Binding:
    """Before the put: the pointer id (pre-generated for a new row) and the subject key."""
    ring = keyring_of(plane)
    pointer_id = pointer.id if pointer is not None else new_id()
    if not ring.enabled:
        return _Binding(pointer_id, None)
    subject = keys.subject_of(address.scope, address.scope_ref,
                              _subject_user(address, meta, pointer))
    return _Binding(pointer_id, keys.key_for_write(session, ring, actor.tenant_id, subject))


def _binds(binding: _Binding, address: MemoryAddress, meta: MemoryMeta,
           pointer: MemoryPointer | None) -> bool:
    if pointer is not None and pointer.id != binding.pointer_id:
        return False
    if binding.key is None:
        return True
    return binding.key.subject == keys.subject_of(address.scope, address.scope_ref,
                                                  _subject_user(address, meta, pointer))


def _key_destroyed(session: Session, key: keys.SubjectKeyHandle | None) -> bool:
    """The object's subject key was destroyed since the write looked it up: an erasure of the
    subject completed in between, and the object (sealed under a dead key, possibly swept
    already) must not be adopted. The share lock makes a key destruction that has not
    committed yet wait for this write, whose pointer the erasure's verification then sees."""
    if key is None:
        return False
    destroyed = session.execute(select(SubjectKey.destroyed_at).where(SubjectKey.id == key.id)
                                .with_for_update(read=True)).scalar()
    return destroyed is not None


def _put(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
         payload: bytes, binding: _Binding) -> str:
    """Step 2: the (sealed) bytes go to a fresh per-version path, create-only."""
    path, blob = _seal(plane, target, actor, address, payload, binding)
    with storage_errors():
        target.adapter.put(path, blob)
    return path


def _seal(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
          payload: bytes, binding: _Binding) -> tuple[str, bytes]:
    """A fresh per-version path for the object, and its bytes sealed for that path."""
    path = target.path(address.object_path(new_id().hex))
    return path, keys.seal_object(keyring_of(plane), actor.tenant_id, binding.key, path,
                                  binding.pointer_id, payload)


def _save(session: Session, plane: DataPlane, target: Target, actor: Actor,
          address: MemoryAddress, pointer: MemoryPointer | None, path: str, payload: bytes,
          meta: MemoryMeta, operation: str, idem: Idempotency | None,
          binding: _Binding) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None]:
    """Step 3: in the open write transaction, move the (locked) pointer to the new object."""
    plane.checkpoint("write:after_put")
    if (not _binds(binding, address, meta, pointer) or _key_destroyed(session, binding.key)
            or repo.gc_marked(session, target.config_id, [path])):
        raise _Rebind()  # (a GC candidate is never adopted: the sweep may be deleting it)
    now = utcnow()
    superseded = None
    if pointer is None:
        pointer = MemoryPointer(
            id=binding.pointer_id, tenant_id=actor.tenant_id, scope_type=address.scope,
            scope_ref=address.scope_ref, key=address.key, version=1, created_at=now,
            memory_type=DEFAULT_MEMORY_TYPES.get(address.scope, "fact"), tags=[],
            importance=3, source="api", has_embeddings=False,
            subject_user_id=address.scope_ref if address.scope == "user" else None,
        )
        session.add(pointer)
    else:
        superseded = (pointer.storage_config_id, pointer.storage_path)
        pointer.version += 1
    _apply_meta(pointer, meta, now)
    ensure_writable(session, actor.tenant_id, pointer.subject_user_id,
                    address.scope_ref if address.scope == "user" else None)
    pointer.storage_config_id = target.config_id
    pointer.storage_path = path
    pointer.storage_class = None  # a new object, in the bucket's default class
    pointer.content_sha256 = sha256_hex(payload)
    pointer.content_size = len(payload)
    pointer.sync_status = "synced"
    pointer.updated_at = now
    session.flush()
    audit.record(session, actor, operation, pointer_id=pointer.id,
                 detail=f"{address.scope} v{pointer.version} {len(payload)} bytes"
                        f"{sealed_address(actor, address, binding.key)}")
    if idem is not None:
        idempotency.remember(session, actor, idem, 200,
                             pointer_json(pointer))
    plane.checkpoint("write:before_commit")
    try:
        session.commit()
    except sa_exc.OperationalError as exc:
        raise CommitUncertain(exc) from exc
    return pointer, superseded


def _after_commit(session: Session, plane: DataPlane,
                  saved: tuple[MemoryPointer, tuple[uuid.UUID, str] | None]) -> MemoryPointer:
    """Step 4: the superseded object goes, best effort (orphan GC finishes otherwise)."""
    pointer, superseded = saved
    plane.checkpoint("write:after_commit")
    if superseded is not None:
        old_config, old_path = superseded
        delete_quietly(plane.by_id(session, old_config), [old_path])
        session.rollback()
    return pointer


def _apply_meta(pointer: MemoryPointer, meta: MemoryMeta, now: Any) -> None:
    if pointer.expires_at is not None and pointer.expires_at <= now:
        pointer.expires_at = None  # its ttl ran out: the new value does not inherit it
    if meta.memory_type is not None:
        pointer.memory_type = meta.memory_type
    if meta.tags is not None:
        pointer.tags = list(dict.fromkeys(meta.tags))
    if meta.importance is not None:
        pointer.importance = meta.importance
    if meta.title is not None:
        pointer.title = meta.title
    if meta.user_id is not None:
        pointer.subject_user_id = meta.user_id
    if meta.agent_id is not None:
        pointer.agent_id = meta.agent_id
    if meta.source is not None:
        pointer.source = meta.source
    if meta.searchable is not None:
        pointer.searchable = meta.searchable
    if meta.ttl_days is not None:
        pointer.expires_at = now + timedelta(days=meta.ttl_days)

