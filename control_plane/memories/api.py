"""The memories domain's public write/delete API: the steps of DESIGN §4's write and delete
protocols that every object behind a ``memory_pointers`` row shares, whether it is a memory
by key (``write.py``, ``delete.py``), an entry (``entries``) or an event body (``events``).

Other domains store their own objects the way memories by key do by calling these, and
nothing else of this package's write or delete internals (docs/development.md, "The memories
domain's public API"). The write protocol, in the order a writer calls them:

  1. ``serialise`` the value, ``check_size`` it, and answer a retried idempotent request
     with ``replay_of`` before doing any work;
  2. put the sealed object at a fresh path with no transaction open;
  3. in one write transaction, check the object may still be adopted (``key_destroyed``),
     move the pointer and append its audit row, then ``commit_or_uncertain``; on any error
     before the commit, ``delete_quietly`` the new object — except on ``CommitUncertain``,
     when the commit may have landed and the object must stay;
  4. after the commit, ``after_commit`` deletes the superseded object (best effort).

The delete protocol: mark the rows ``pending_delete`` and commit, then ``finish_deletes``.

Each function commits where its docstring says, because the bucket is not part of the
database transaction.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import base as storage

from .. import idempotency
from ..audit import service as audit
from ..db.engine import begin_write
from ..db.models import MemoryPointer, SubjectKey
from ..errors import InvalidInput, PayloadTooLarge
from ..idempotency import Idempotency, Replay
from ..identity import Actor
from ..keys import subject_keys as keys
from ..plane.data_plane import DataPlane, Target, storage_errors
from . import repository as repo

__all__ = [
    "CommitUncertain", "after_commit", "check_size", "commit_or_uncertain", "delete_quietly",
    "finish_deletes", "key_destroyed", "replay_of", "serialise",
]

log = logging.getLogger(__name__)

# json.dumps with these settings builds an encoder per call; one, kept, writes the same text.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def serialise(value: Any) -> bytes:
    """The value's canonical JSON (UTF-8, no spaces, no NaN), the bytes whose SHA-256 a
    pointer records. 400 (``InvalidInput``) for a value JSON cannot hold."""
    try:
        return _ENCODER.encode(value).encode()
    except ValueError as exc:
        raise InvalidInput(f"value is not valid JSON: {exc}") from None


def check_size(plane: DataPlane, size: int) -> None:
    """Refuse (413) a value that would be stored larger than MEMPLANE_MAX_OBJECT_BYTES."""
    limit = plane.max_object_bytes
    if limit is not None and size > limit:
        raise PayloadTooLarge(
            f"the stored value would be {size} bytes, over this server's limit of {limit} bytes "
            "per memory (MEMPLANE_MAX_OBJECT_BYTES); keep the value smaller, or start a new "
            "key instead of appending to this one"
        )


def replay_of(session: Session, actor: Actor, idem: Idempotency | None) -> Replay | None:
    """The first answer to a retried idempotent request, or None (no key, or a key not seen
    yet). When there is one, the session's transaction is rolled back and a ``replay`` audit
    row for the first answer's pointer is committed; the caller returns the replay as is."""
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


def key_destroyed(session: Session, key: keys.SubjectKeyHandle | None) -> bool:
    """The object's subject key was destroyed since the write looked it up: an erasure of the
    subject completed in between, and the object (sealed under a dead key, possibly swept
    already) must not be adopted. The share lock makes a key destruction that has not
    committed yet wait for this write, whose pointer the erasure's verification then sees.
    Call it in the write transaction that moves the pointer; False without a key."""
    if key is None:
        return False
    destroyed = session.execute(select(SubjectKey.destroyed_at).where(SubjectKey.id == key.id)
                                .with_for_update(read=True)).scalar()
    return destroyed is not None


class CommitUncertain(Exception):
    """A commit failed in a way that leaves its outcome unknown (the connection dropped):
    the row may name the new object, so the object must stay; GC removes it if not."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


def commit_or_uncertain(session: Session) -> None:
    """Commit the write transaction that adopts a new object; a lost connection
    (``OperationalError``) is raised as ``CommitUncertain``, whose ``original`` the caller
    re-raises after rolling back, keeping the object."""
    try:
        session.commit()
    except sa_exc.OperationalError as exc:  # the connection died: the outcome is unknown
        raise CommitUncertain(exc) from exc


def delete_quietly(target: Target, paths: list[str]) -> None:
    """Delete objects no committed pointer names (a write's own object after a failure, or
    a superseded one), best effort: a storage failure is logged and left to orphan GC."""
    try:
        target.delete(paths)
    except storage.StorageError:
        log.warning("could not delete %d superseded object(s); orphan GC will", len(paths))


def after_commit(session: Session, plane: DataPlane,
                 saved: tuple[MemoryPointer, tuple[uuid.UUID, str] | None]) -> MemoryPointer:
    """Step 4, once the pointer's transaction committed: ``saved`` is the pointer and the
    (storage config id, path) of the object it superseded, or None for a new pointer. The
    superseded object goes, best effort (orphan GC finishes otherwise); returns the
    pointer."""
    pointer, superseded = saved
    plane.checkpoint("write:after_commit")
    if superseded is not None:
        old_config, old_path = superseded
        delete_quietly(plane.by_id(session, old_config), [old_path])
        session.rollback()
    return pointer


def finish_deletes(session: Session, plane: DataPlane, actor: Actor,
                   pointers: list[MemoryPointer], operation: str, *,
                   detail: str | None = None,
                   before_commit: Callable[[int], None] | None = None) -> int:
    """Delete the objects of pointers marked ``pending_delete`` (every version on a versioned
    bucket, ``Target.delete``), then the rows still pending with one audit row each; shared
    by deletes, clears, entries, retention and cleanup. ``detail`` replaces the rows' detail;
    ``before_commit(removed)`` runs in the rows' transaction (a job saves its counts there, so
    a crash never counts a deletion twice). The rows must have been marked and committed
    before the call; a storage failure raises (the rows stay pending for the reconciler).
    Commits; returns how many rows it removed (a row no longer ``pending_delete`` — written
    again meanwhile — is left alone and not counted)."""
    by_target: dict[uuid.UUID, list[str]] = {}
    for pointer in pointers:
        by_target.setdefault(pointer.storage_config_id, []).append(pointer.storage_path)
        if pointer.embedding_storage_path:  # its search vector goes with it
            by_target[pointer.storage_config_id].append(pointer.embedding_storage_path)
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
                     detail=detail or f"{pointer.scope_type} v{pointer.version}")
    if before_commit is not None:
        before_commit(removed)
    session.commit()
    return removed
