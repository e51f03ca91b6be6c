"""Memories by key, the write protocol's general path (DESIGN §4), for what the fast path
(``write_fast``) cannot settle — an idempotent write, an append, a subject without a key yet,
a row that changed since the lookup:

  1. look the pointer up and bind the object to it (``bind``: its id and subject key);
  2. put the sealed bytes at a fresh per-version path, create-only (``put``; no transaction
     is open);
  3. one transaction: lock the pointer row, check it is still what the object was sealed
     for, point it at the new object as ``synced``, bump ``version``, append the audit row,
     commit (``save``) — a row that changed meanwhile seals the object again (``Rebind``).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from .. import idempotency
from ..addresses import DEFAULT_MEMORY_TYPES, MemoryAddress
from ..audit import service as audit
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..errors import Conflict
from ..holds.guard import ensure_writable
from ..idempotency import Idempotency
from ..identity import Actor
from ..keys import subject_keys as keys
from ..kit import sha256_hex
from ..plane.data_plane import DataPlane, Target, storage_errors
from . import guesses
from . import repository as repo
from .api import CommitUncertain, commit_or_uncertain, delete_quietly, key_destroyed
from .schemas import MemoryMeta, pointer_json
from .sealing import Binding, seal
from .shared import keyring_of, sealed_address, subject_after_write


class Rebind(Exception):
    """The locked row is not what the object was sealed for (a concurrent first write made
    the row with another id, or the data subject changed): seal the object again."""


def write_general(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                  payload: bytes, meta: MemoryMeta, idem: Idempotency | None
                  ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None]:
    """Steps 1–3 of the general path for a set: the saved pointer and what it superseded
    (step 4, ``api.after_commit``, is the caller's)."""
    target = plane.for_memory(session, actor.tenant_id, address.scope, meta.agent_id,
                              meta.user_id)
    binding = bind(session, plane, actor, address, meta,
                   repo.get(session, actor.tenant_id, address))
    # No transaction may stay open across bucket I/O.
    session.commit()
    plane.checkpoint("write:after_lookup")
    path = put(plane, target, actor, address, payload, binding)
    plane.checkpoint("write:general_after_put")  # race tests: put, no transaction open
    try:
        for attempt in range(1, 4):
            begin_write(session)
            pointer = repo.lock(session, actor.tenant_id, address)
            try:
                saved = save(session, plane, target, actor, address, pointer, path,
                             payload, meta, "write", idem, binding)
                break
            except sa_exc.IntegrityError:
                # Another writer created the row first; take the update path against it.
                session.rollback()
                if attempt == 3:
                    raise
            except Rebind:
                # Sealed for a pointer id or subject the row no longer has: seal it again.
                session.rollback()
                delete_quietly(target, [path])
                if attempt == 3:
                    raise Conflict("the memory kept changing while it was being written; "
                                   "retry") from None
                binding = bind(session, plane, actor, address, meta,
                               repo.get(session, actor.tenant_id, address))
                session.commit()
                path = put(plane, target, actor, address, payload, binding)
                plane.checkpoint("write:general_after_put")
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
    return saved


def _subject_user(address: MemoryAddress, meta: MemoryMeta,
                  pointer: MemoryPointer | None) -> str | None:
    """The pointer's data subject once this write is saved (mirrors ``save``)."""
    return subject_after_write(address, meta.user_id, pointer is not None,
                               pointer.subject_user_id if pointer is not None else None)


def bind(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
         meta: MemoryMeta, pointer: MemoryPointer | None) -> Binding:
    """Before the put: the pointer id (pre-generated for a new row) and the subject key."""
    ring = keyring_of(plane)
    pointer_id = pointer.id if pointer is not None else new_id()
    if not ring.enabled:
        return Binding(pointer_id, None)
    subject = keys.subject_of(address.scope, address.scope_ref,
                              _subject_user(address, meta, pointer))
    return Binding(pointer_id, keys.key_for_write(session, ring, actor.tenant_id, subject))


def binds(binding: Binding, address: MemoryAddress, meta: MemoryMeta,
          pointer: MemoryPointer | None) -> bool:
    """The locked row (or its absence) is still what the object was sealed for."""
    if pointer is not None and pointer.id != binding.pointer_id:
        return False
    if binding.key is None:
        return True
    return binding.key.subject == keys.subject_of(address.scope, address.scope_ref,
                                                  _subject_user(address, meta, pointer))


def put(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
        payload: bytes, binding: Binding) -> str:
    """Step 2: the (sealed) bytes go to a fresh per-version path, create-only."""
    path, blob = seal(plane, target, actor, address, payload, binding)
    with storage_errors():
        target.adapter.put(path, blob)
    return path


def save(session: Session, plane: DataPlane, target: Target, actor: Actor,
         address: MemoryAddress, pointer: MemoryPointer | None, path: str, payload: bytes,
         meta: MemoryMeta, operation: str, idem: Idempotency | None,
         binding: Binding) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None]:
    """Step 3: in the open write transaction, move the (locked) pointer to the new object."""
    plane.checkpoint("write:after_put")
    if (not binds(binding, address, meta, pointer) or key_destroyed(session, binding.key)
            or repo.gc_marked(session, target.config_id, [path])):
        raise Rebind()  # (a GC candidate is never adopted: the sweep may be deleting it)
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
    commit_or_uncertain(session)
    return pointer, superseded


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
    if (ttl := meta.ttl()) is not None:
        pointer.expires_at = now + ttl

