"""Memories by key, the write protocol (DESIGN §4): object first, then the pointer.

  1. serialise the value, hash the plaintext;
  2. put the bytes at a fresh per-version path, create-only (no transaction is open);
  3. one transaction: lock the pointer row, point it at the new object as ``synced``,
     bump ``version``, append the audit row, commit — only then does the API answer 2xx;
  4. after the commit, delete the superseded object (best effort; orphan GC finishes).
A crash between 2 and 3 leaves an orphan object that no pointer names, which GC removes.

This module holds the operations (set, append); a set takes the fast path (``write_fast``)
when it can and the general path (``write_general``) otherwise; the steps other domains
share are in ``api``.

The protocol commits at the steps named above, because the bucket is not part of the
database transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from ..addresses import MemoryAddress
from ..audit.service import audited
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..dlp.guard import screen_memory
from ..errors import Conflict, Forbidden
from ..idempotency import Idempotency, Replay
from ..identity import EVERYTHING, Access, Actor
from ..plane.data_plane import DataPlane
from . import repository as repo
from .api import (
    CommitUncertain,
    after_commit,
    check_size,
    delete_quietly,
    replay_of,
    serialise,
)
from .read import fetch_locked
from .schemas import MemoryMeta
from .shared import ensure_in_scope, expired
from .write_fast import write_fast
from .write_general import Rebind, bind, binds, put, save, write_general


def as_agent(access: Access, meta: MemoryMeta) -> MemoryMeta:
    """A key with an agent id writes as that agent: it fills ``agent_id`` in, and a body
    naming another agent is refused (a data subject's own key: the same for ``user_id``)."""
    if access.user_id is not None and meta.user_id != access.user_id:
        meta = meta.model_copy(update={"user_id": access.writes_for(meta.user_id)})
    if access.agent_id is None or meta.agent_id == access.agent_id:
        return meta
    if meta.agent_id is None:
        return meta.model_copy(update={"agent_id": access.agent_id})
    raise Forbidden(f"this key writes as agent {access.agent_id!r}; leave agent_id out or "
                    f"send that one")


def set_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
              value: Any, meta: MemoryMeta, idem: Idempotency | None = None, *,
              access: Access = EVERYTHING) -> MemoryPointer | Replay:
    """Store ``value`` at the address, replacing what was there (last writer wins)."""
    with audited(session, actor, "write", detail=address.scope,
                 private=(*address.personal, meta.user_id)):
        ensure_in_scope(session, actor, access, address, "write")
        meta = as_agent(access, meta)
        replay = replay_of(session, actor, idem)
        if replay is not None:
            return replay
        if idem is not None:
            plane.checkpoint("idempotency:checked")  # race tests: no replay, in flight
        # What remember extracted is refused (redacted for a job) whatever the policy.
        value, meta = screen_memory(session, actor, value, meta,
                                    extracted=meta.source == "remember")
        try:
            payload = serialise(value)
            check_size(plane, len(payload))
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
        ensure_in_scope(session, actor, access, address, "append")
        meta = as_agent(access, meta)
        replay = replay_of(session, actor, idem)
        if replay is not None:
            return replay
        if idem is not None:
            plane.checkpoint("idempotency:checked")  # race tests: no replay, in flight
        item, meta = screen_memory(session, actor, item, meta, what="the item")
        item_bytes = serialise(item)
        for attempt in range(1, 5):
            target = plane.for_memory(session, actor.tenant_id, address.scope, meta.agent_id,
                                      meta.user_id)
            binding = bind(session, plane, actor, address, meta,
                           repo.get(session, actor.tenant_id, address))
            session.commit()
            begin_write(session)
            pointer = repo.lock(session, actor.tenant_id, address)
            if not binds(binding, address, meta, pointer):
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
                check_size(plane, pointer.content_size + comma + len(item_bytes))
                stored = fetch_locked(session, plane, actor, pointer)
                if not isinstance(stored, list):
                    raise Conflict(
                        "the value stored at this key is not a list, so nothing can be "
                        "appended to it; use set to replace it"
                    )
                items = stored
            items.append(item)
            payload = serialise(items)
            check_size(plane, len(payload))
            path = put(plane, target, actor, address, payload, binding)
            try:
                saved = save(session, plane, target, actor, address, pointer, path,
                             payload, meta, "append", idem, binding)
            except sa_exc.IntegrityError:
                # Another first append created the row, or a twin request took the
                # idempotency key; start over against it.
                session.rollback()
                delete_quietly(target, [path])
                if attempt >= 2:
                    return _replay_after_race(session, actor, idem)
                replay = replay_of(session, actor, idem)
                if replay is not None:
                    return replay
                continue
            except Rebind:
                # The subject's key was destroyed, or orphan GC marked the new object, since
                # the lookup: that object is never adopted; start over with a new one.
                session.rollback()
                delete_quietly(target, [path])
                continue
            except CommitUncertain as exc:
                session.rollback()
                raise exc.original from None  # keep the object: the commit may have landed
            except Exception:
                session.rollback()
                delete_quietly(target, [path])
                raise
            return after_commit(session, plane, saved)
        raise Conflict("the memory kept changing while it was being appended to; retry")


def _replay_after_race(session: Session, actor: Actor, idem: Idempotency | None) -> Replay:
    """A twin request with the same key committed first; answer with its result."""
    session.rollback()
    replay = replay_of(session, actor, idem)
    if replay is None:
        raise Conflict("the memory was written concurrently by another request; retry")
    return replay


def _write(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
           payload: bytes, meta: MemoryMeta, idem: Idempotency | None) -> MemoryPointer:
    if idem is None:
        fast = write_fast(session, plane, actor, address, payload, meta)
        if fast is not None:
            return after_commit(session, plane, fast)
    return after_commit(session, plane,
                        write_general(session, plane, actor, address, payload, meta, idem))
