"""Memories by key: the write, read and delete protocols of DESIGN §4.

Write — object first, then the pointer:
  1. serialise the value, hash the plaintext;
  2. put the bytes at a fresh per-version path, create-only (no transaction is open);
  3. one transaction: lock the pointer row, point it at the new object as ``synced``,
     bump ``version``, append the audit row, commit — only then does the API answer 2xx;
  4. after the commit, delete the superseded object (best effort; orphan GC finishes).
A crash between 2 and 3 leaves an orphan object that no pointer names, which GC removes.

Read — look the pointer up, fetch, hash, compare (I3), audit.
Delete — mark ``pending_delete`` (commit), delete the object, delete the row with its audit
row (commit). A crash in between leaves a ``pending_delete`` row the reconciler finishes.

These protocols commit at the steps named above, because the bucket is not part of the
database transaction; everything else commits through the request's session.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.envelope import DecryptionError

from .. import idempotency
from ..audit import sealed
from ..audit import service as audit
from ..audit.service import Actor, audited
from ..compliance.guard import ensure_writable, erasure_in_progress
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer, SubjectKey
from ..errors import Conflict, Forbidden, HashMismatch, InvalidInput, NotFound, PayloadTooLarge
from ..idempotency import Idempotency, Replay
from ..keys import service as keys
from ..kit import decode_uuid_cursor, encode_cursor, page_limit, request_id_var, sha256_hex
from ..storage_config.plane import DataPlane, Target, storage_errors
from ..tenants.access import EVERYTHING, Access
from ..tenants.access import ensure_visible as access_check
from . import hotpath
from . import repository as repo
from .addresses import DEFAULT_MEMORY_TYPES, MemoryAddress, nfc
from .schemas import MemoryMeta, PointerOut

log = logging.getLogger(__name__)

_READ_ATTEMPTS = 3
_CLEAR_BATCH = 500


@dataclass(frozen=True)
class _Binding:
    """What a new object is sealed for: the pointer id in its associated data, and the
    subject key (None while encryption is off). Both are known before the put."""

    pointer_id: uuid.UUID
    key: keys.SubjectKeyHandle | None


class _CommitUncertain(Exception):
    """The commit failed in a way that leaves its outcome unknown (the connection dropped):
    the pointer may name the new object, so the object must stay; GC removes it if not."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


class _Rebind(Exception):
    """The locked row is not what the object was sealed for (a concurrent first write made
    the row with another id, or the data subject changed): seal the object again."""


@dataclass(frozen=True)
class MemoryValue:
    value: Any
    pointer: MemoryPointer


def serialise(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode()
    except ValueError as exc:
        raise InvalidInput(f"value is not valid JSON: {exc}") from None


def ensure_visible(session: Session, actor: Actor, access: Access, address: MemoryAddress,
                   operation: str) -> None:
    """404 "no memory at …" for an address outside the key's scopes, as if it were missing."""
    access_check(session, actor, access, address.scope, address.scope_ref,
                 operation=operation, what=f"{address.scope} memory",
                 missing=f"no memory at {address.describe()}")


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
            target = plane.active(session, actor.tenant_id)
            binding = _bind(session, plane, actor, address, meta,
                            repo.get(session, actor.tenant_id, address))
            session.commit()
            begin_write(session)
            pointer = repo.lock(session, actor.tenant_id, address)
            if not _binds(binding, address, meta, pointer):
                session.rollback()  # the row changed since the key lookup (rare): look again
                continue
            items: list[Any] = []
            if pointer is not None and pointer.sync_status != "pending_delete":
                # Refuse before fetching the list: it grows by the item and a comma ("[]" by
                # the item alone), so its new size is known without reading it.
                comma = 1 if pointer.content_size > 2 else 0
                _check_size(plane, pointer.content_size + comma + len(item_bytes))
                stored = _fetch_locked(session, plane, actor, pointer)
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
                _delete_quietly(target, [path])
                if attempt >= 2:
                    return _replay_after_race(session, actor, idem)
                replay = _replay(session, actor, idem)
                if replay is not None:
                    return replay
                continue
            except _CommitUncertain as exc:
                session.rollback()
                raise exc.original from None  # keep the object: the commit may have landed
            except Exception:
                session.rollback()
                _delete_quietly(target, [path])
                raise
            return _after_commit(session, plane, saved)
        raise Conflict("the memory kept changing while it was being appended to; retry")


def _replay(session: Session, actor: Actor, idem: Idempotency | None) -> Replay | None:
    if idem is None:
        return None
    replay = idempotency.find(session, actor.tenant_id, idem)
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
    target = plane.active(session, actor.tenant_id)
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
                _delete_quietly(target, [path])
                if attempt == 3:
                    raise Conflict("the memory kept changing while it was being written; "
                                   "retry") from None
                binding = _bind(session, plane, actor, address, meta,
                                repo.get(session, actor.tenant_id, address))
                session.commit()
                path = _put(plane, target, actor, address, payload, binding)
    except _CommitUncertain as exc:
        session.rollback()
        raise exc.original from None  # keep the object: the commit may have landed
    except Exception:  # the new object is an orphan now; remove it rather than wait for GC
        session.rollback()
        _delete_quietly(target, [path])
        raise
    return _after_commit(session, plane, saved)


def _write_fast(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                payload: bytes, meta: MemoryMeta
                ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None] | None:
    """The write protocol in two statements (``hotpath``). None when the fast path cannot
    settle it — the subject has no key yet, or the row changed since the lookup — and the
    general protocol below must."""
    target = plane.active(session, actor.tenant_id)
    found = hotpath.lookup_for_write(session, actor.tenant_id, address, meta.user_id)
    if found.blocked_by is not None:
        raise erasure_in_progress(found.blocked_by)
    ring = _keyring(plane)
    handle = None
    if ring.enabled:
        if found.key is None or found.key.wrapped_key is None:
            return None
        handle = keys.handle_of(session, ring, actor.tenant_id, found.key.id,
                                (found.key.scope_type, found.key.scope_ref),
                                found.key.wrapped_key, found.key.kek_version_id)
        session.commit()
    pointer_id = found.pointer_id or new_id()
    plane.checkpoint("write:after_lookup")  # race tests: the lookup is done, the put is not
    path = _put(plane, target, actor, address, payload, _Binding(pointer_id, handle))
    now = utcnow()
    subject_user = _subject_after_write(address, meta, found.pointer_id is not None,
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
        audit_address=_sealed_address(actor, address, handle),
        key_id=handle.id if handle is not None else None,
    )
    plane.checkpoint("write:after_put")
    try:
        plane.checkpoint("write:before_commit")
        outcome = hotpath.commit_write(session, request)
    except sa_exc.OperationalError:
        session.rollback()
        raise  # keep the object: the statement may have committed before the connection died
    except Exception:
        session.rollback()
        _delete_quietly(target, [path])
        raise
    if outcome.pointer is None:
        _delete_quietly(target, [path])
        if outcome.blocked_by is not None:
            raise erasure_in_progress(outcome.blocked_by)
        return None
    return outcome.pointer, outcome.superseded


def _sealed_address(actor: Actor, address: MemoryAddress,
                    key: keys.SubjectKeyHandle | None) -> str:
    """The audit row's address, sealed under the memory's subject key (``audit.sealed``);
    nothing without a key: the row's pointer id names the memory."""
    if key is None:
        return ""
    return " " + sealed.seal(actor.tenant_id, key.id, key.key, address.describe())


def _read_key(session: Session, plane: DataPlane, actor: Actor,
              live: hotpath.KeyRow | None) -> keys.SubjectKeyHandle | None:
    """The live key the read's lookup found, unwrapped (from the cache: the read used it)."""
    if live is None or live.wrapped_key is None:
        return None
    return keys.handle_of(session, _keyring(plane), actor.tenant_id, live.id, ("", ""),
                          live.wrapped_key, live.kek_version_id)


def _given(value: str | None) -> str:
    return "None" if value is None else "(given)"


def _keyring(plane: DataPlane) -> keys.Keyring:
    if plane.keys is None:
        raise RuntimeError("the data plane has no keyring; build it through Runtime")
    return plane.keys


def _subject_user(address: MemoryAddress, meta: MemoryMeta,
                  pointer: MemoryPointer | None) -> str | None:
    """The pointer's data subject once this write is saved (mirrors ``_save``)."""
    return _subject_after_write(address, meta, pointer is not None,
                                pointer.subject_user_id if pointer is not None else None)


def _subject_after_write(address: MemoryAddress, meta: MemoryMeta, exists: bool,
                         current: str | None) -> str | None:
    """The data subject a row will have after this write: the one given, else the existing
    row's, else (for a new row) the user of a ``user`` scope."""
    if meta.user_id is not None:
        return meta.user_id
    if exists:
        return current
    return address.scope_ref if address.scope == "user" else None


def _bind(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
          meta: MemoryMeta, pointer: MemoryPointer | None) -> _Binding:
    """Before the put: the pointer id (pre-generated for a new row) and the subject key."""
    ring = _keyring(plane)
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
    path = target.path(address.object_path(new_id().hex))
    blob = keys.seal_object(_keyring(plane), actor.tenant_id, binding.key, path,
                            binding.pointer_id, payload)
    with storage_errors():
        target.adapter.put(path, blob)
    return path


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
    pointer.content_sha256 = sha256_hex(payload)
    pointer.content_size = len(payload)
    pointer.sync_status = "synced"
    pointer.updated_at = now
    session.flush()
    audit.record(session, actor, operation, pointer_id=pointer.id,
                 detail=f"{address.scope} v{pointer.version} {len(payload)} bytes"
                        f"{_sealed_address(actor, address, binding.key)}")
    if idem is not None:
        idempotency.remember(session, actor.tenant_id, idem, 200,
                             PointerOut.of(pointer).model_dump(mode="json"))
    plane.checkpoint("write:before_commit")
    try:
        session.commit()
    except sa_exc.OperationalError as exc:
        raise _CommitUncertain(exc) from exc
    return pointer, superseded


def _after_commit(session: Session, plane: DataPlane,
                  saved: tuple[MemoryPointer, tuple[uuid.UUID, str] | None]) -> MemoryPointer:
    """Step 4: the superseded object goes, best effort (orphan GC finishes otherwise)."""
    pointer, superseded = saved
    plane.checkpoint("write:after_commit")
    if superseded is not None:
        old_config, old_path = superseded
        _delete_quietly(plane.by_id(session, old_config), [old_path])
        session.rollback()
    return pointer


def _apply_meta(pointer: MemoryPointer, meta: MemoryMeta, now: Any) -> None:
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
    if meta.ttl_days is not None:
        pointer.expires_at = now + timedelta(days=meta.ttl_days)


def get_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
              access: Access = EVERYTHING) -> MemoryValue:
    """Read and verify the value at the address (I3)."""
    with audited(session, actor, "read", detail=address.scope, private=address.personal):
        ensure_visible(session, actor, access, address, "read")
        found = hotpath.lookup_for_read(session, actor.tenant_id, address)
        pointer = _check_live(found[0] if found else None, address)
        live = found[1] if found else None
        result = _read_verified(session, plane, actor, address, pointer,
                                (live.id, live.wrapped_key, live.kek_version_id)
                                if live is not None and live.wrapped_key is not None else None)
        detail = address.scope + _sealed_address(actor, address, _read_key(
            session, plane, actor, live))
        session.commit()
        if plane.audit_batcher is not None:
            plane.audit_batcher.record(actor.tenant_id, actor.accessor_type, actor.accessor_id,
                                       "read", pointer_id=result.pointer.id, detail=detail,
                                       agent_id=actor.agent_id)
            return result
        begin_write(session)
        audit.record(session, actor, "read", pointer_id=result.pointer.id, detail=detail)
        session.commit()
        return result


def _live_pointer(session: Session, actor: Actor, address: MemoryAddress) -> MemoryPointer:
    return _check_live(repo.get(session, actor.tenant_id, address), address)


def _check_live(pointer: MemoryPointer | None, address: MemoryAddress) -> MemoryPointer:
    if pointer is None or pointer.sync_status in ("pending_delete", "pending_write"):
        raise NotFound(f"no memory at {address.describe()}")
    if pointer.expires_at is not None and pointer.expires_at <= utcnow():
        raise NotFound(f"the memory at {address.describe()} has expired")
    return pointer


def _read_verified(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                   pointer: MemoryPointer,
                   live: tuple[uuid.UUID, bytes, uuid.UUID] | None = None) -> MemoryValue:
    for _ in range(_READ_ATTEMPTS):
        target = plane.by_id(session, pointer.storage_config_id)
        session.commit()
        data, actual, problem = _open(session, plane, actor, target, pointer, live)
        live = None  # a second attempt reads a newer object: look its key up
        if actual == pointer.content_sha256:
            if pointer.sync_status == "corrupt":
                begin_write(session)
                repo.mark_synced(session, pointer.id, pointer.storage_path, utcnow())
                session.commit()
            return MemoryValue(json.loads(data), pointer)
        # A concurrent overwrite may have replaced the object after we read the pointer:
        # look again before calling anything corrupt. (The lookup refreshes the very same
        # object in the session, so remember what was read first.)
        seen = (pointer.version, pointer.storage_path)
        fresh = _live_pointer(session, actor, address)
        if (fresh.version, fresh.storage_path) != seen:
            pointer = fresh
            continue
        _report_corrupt(session, actor, pointer, actual, problem)
    raise Conflict("the memory kept changing while it was being read; retry")


def read_pointer(session: Session, plane: DataPlane, actor: Actor,
                 pointer: MemoryPointer) -> MemoryValue:
    """Read and verify one pointer's value (I3) for bulk readers such as export.

    Same checks as ``get_value`` (a mismatch marks the pointer corrupt and raises
    HashMismatch); the caller writes its own audit row.
    """
    address = MemoryAddress(pointer.scope_type, pointer.scope_ref, pointer.key)
    return _read_verified(session, plane, actor, address, pointer)


def _fetch_locked(session: Session, plane: DataPlane, actor: Actor,
                  pointer: MemoryPointer) -> Any:
    """Read and verify while holding the pointer's lock: a mismatch is real corruption."""
    target = plane.by_id(session, pointer.storage_config_id)
    data, actual, problem = _open(session, plane, actor, target, pointer)
    if actual == pointer.content_sha256:
        return json.loads(data)
    session.rollback()
    _report_corrupt(session, actor, pointer, actual, problem)


def _open(session: Session, plane: DataPlane, actor: Actor, target: Target,
          pointer: MemoryPointer, live: tuple[uuid.UUID, bytes, uuid.UUID] | None = None
          ) -> tuple[bytes, str | None, str | None]:
    """Fetch and decrypt: (plaintext, its SHA-256, why it could not be decrypted).

    A missing object gives no hash and no problem; an object that does not decrypt (wrong or
    destroyed key, edited, truncated, swapped) gives no hash and the reason.
    """
    try:
        with storage_errors(pointer.id):
            blob = target.adapter.get(pointer.storage_path)
    except storage.ObjectNotFound:
        return b"", None, None
    try:
        data = keys.open_object(session, _keyring(plane), actor.tenant_id,
                                pointer.storage_path, pointer.id, blob, live)
    except DecryptionError as exc:
        return b"", None, str(exc)
    return data, sha256_hex(data), None


def _report_corrupt(session: Session, actor: Actor, pointer: MemoryPointer,
                    actual: str | None, problem: str | None = None) -> NoReturn:
    begin_write(session)
    repo.mark_corrupt(session, pointer.id, pointer.storage_path, utcnow())
    if problem is not None:
        what = f"could not be decrypted ({problem})"
    else:
        what = "is missing from the bucket" if actual is None else "does not match its hash"
    audit.record(session, actor, "read", success=False, pointer_id=pointer.id,
                 detail=f"hash_mismatch: object {what}; expected {pointer.content_sha256} "
                        f"actual {actual}")
    session.commit()
    error = HashMismatch(
        f"the stored object {what}; it was not served and the pointer is marked corrupt",
        pointer_id=str(pointer.id), expected_sha256=pointer.content_sha256,
        actual_sha256=actual,
    )
    error.audited = True
    raise error


def delete_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
                 access: Access = EVERYTHING) -> None:
    """Delete the memory and its object. Safe to retry after a failure."""
    with audited(session, actor, "delete", detail=address.scope, private=address.personal):
        ensure_visible(session, actor, access, address, "delete")
        session.commit()
        begin_write(session)
        pointer = repo.lock(session, actor.tenant_id, address)
        if pointer is None:
            raise NotFound(f"no memory at {address.describe()}")
        ensure_writable(session, actor.tenant_id, pointer.subject_user_id,
                        address.scope_ref if address.scope == "user" else None)
        pointer.sync_status, pointer.updated_at = "pending_delete", utcnow()
        session.commit()
        plane.checkpoint("delete:after_mark")
        _finish_deletes(session, plane, actor, [pointer], "delete")


def clear_scope(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
                access: Access = EVERYTHING) -> int:
    """Delete every memory of one scope ref, in batches."""
    deleted = 0
    with audited(session, actor, "clear", detail=address.scope, private=address.personal):
        ensure_visible(session, actor, access, address, "clear")
        while True:
            session.commit()
            begin_write(session)
            batch = list(repo.lock_scope(session, actor.tenant_id, address.scope,
                                         address.scope_ref, _CLEAR_BATCH))
            now = utcnow()
            for pointer in batch:
                pointer.sync_status, pointer.updated_at = "pending_delete", now
            session.commit()
            # Include rows an earlier, interrupted clear left behind.
            batch += [p for p in repo.pending_delete_in_scope(
                session, actor.tenant_id, address.scope, address.scope_ref, _CLEAR_BATCH)
                if p not in batch]
            session.commit()
            if not batch:
                return deleted
            plane.checkpoint("delete:after_mark")
            deleted += _finish_deletes(session, plane, actor, batch, "delete")


def _finish_deletes(session: Session, plane: DataPlane, actor: Actor,
                    pointers: list[MemoryPointer], operation: str) -> int:
    by_target: dict[uuid.UUID, list[str]] = {}
    for pointer in pointers:
        by_target.setdefault(pointer.storage_config_id, []).append(pointer.storage_path)
    for config_id, paths in by_target.items():
        target = plane.by_id(session, config_id)
        session.commit()
        with storage_errors():
            target.delete(paths)
    plane.checkpoint("delete:after_object")
    begin_write(session)
    removed = repo.delete_pending(session, [p.id for p in pointers])
    for pointer in pointers:
        audit.record(session, actor, operation, pointer_id=pointer.id,
                     detail=f"{pointer.scope_type} v{pointer.version}")
    session.commit()
    return removed


def _delete_quietly(target: Target, paths: list[str]) -> None:
    try:
        target.delete(paths)
    except storage.StorageError:
        log.warning("could not delete %d superseded object(s); orphan GC will", len(paths))


def list_pointers(session: Session, actor: Actor, *, scope: str | None, scope_ref: str | None,
                  user_id: str | None, memory_type: str | None, sync_status: str | None,
                  cursor: str | None, limit: int | None,
                  access: Access = EVERYTHING) -> tuple[list[MemoryPointer], str | None]:
    """One page of the pointers the key may see (a scoped key's list is filtered in SQL)."""
    size = page_limit(limit)
    after = decode_uuid_cursor(cursor)
    scope_ref, user_id = (nfc(v) if v is not None else None for v in (scope_ref, user_id))
    rows = list(repo.list_page(session, actor.tenant_id, scope=scope, scope_ref=scope_ref,
                               user_id=user_id, memory_type=memory_type,
                               sync_status=sync_status, after=after, limit=size + 1,
                               access=access))
    next_cursor = encode_cursor(str(rows[size - 1].id)) if len(rows) > size else None
    session.commit()
    begin_write(session)
    # Filters by scope ref or user are personal: the row says only whether one was given.
    audit.record(session, actor, "list", detail=f"pointers scope={scope} ref={_given(scope_ref)} "
                                                f"user={_given(user_id)} -> {min(len(rows), size)}")
    session.commit()
    return rows[:size], next_cursor
