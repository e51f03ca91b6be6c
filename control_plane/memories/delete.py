"""Memories by key, the delete protocol: mark ``pending_delete`` (commit), delete the
object, delete the row with its audit row (commit). A crash in between leaves a
``pending_delete`` row the reconciler finishes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import Actor, audited
from ..compliance.guard import ensure_writable
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..errors import NotFound
from ..holds.service import ensure_not_held, ensure_scope_not_held
from ..plane.data_plane import DataPlane, storage_errors
from ..tenants.access import EVERYTHING, Access
from . import guesses
from . import repository as repo
from .addresses import MemoryAddress
from .shared import (
    ensure_visible,
)

log = logging.getLogger(__name__)


_CLEAR_BATCH = 500


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
        ensure_not_held(session, actor.tenant_id, scope=address.scope,
                        scope_ref=address.scope_ref, subject=pointer.subject_user_id)
        pointer.sync_status, pointer.updated_at = "pending_delete", utcnow()
        session.commit()
        plane.checkpoint("delete:after_mark")
        _finish_deletes(session, plane, actor, [pointer], "delete")
        guesses.forget_row(actor.tenant_id, address)


def clear_scope(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
                access: Access = EVERYTHING) -> int:
    """Delete every memory of one scope ref, in batches."""
    deleted = 0
    with audited(session, actor, "clear", detail=address.scope, private=address.personal):
        ensure_visible(session, actor, access, address, "clear")
        ensure_scope_not_held(session, actor.tenant_id, address.scope, address.scope_ref)
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
                # One row for the clear itself, also when the scope was empty (the rows of
                # the memories it removed are the per-memory "delete" rows above).
                begin_write(session)
                audit.record(session, actor, "clear",
                             detail=f"{address.scope}: {deleted} deleted")
                session.commit()
                return deleted
            plane.checkpoint("delete:after_mark")
            deleted += _finish_deletes(session, plane, actor, batch, "delete")


def _finish_deletes(session: Session, plane: DataPlane, actor: Actor,
                    pointers: list[MemoryPointer], operation: str, *,
                    detail: str | None = None,
                    before_commit: Callable[[int], None] | None = None) -> int:
    """Delete the objects of pointers marked ``pending_delete`` (every version on a versioned
    bucket, ``Target.delete``), then the rows still pending with one audit row each; shared
    by deletes, clears, entries, retention and cleanup. ``detail`` replaces the rows' detail;
    ``before_commit(removed)`` runs in the rows' transaction (a job saves its counts there, so
    a crash never counts a deletion twice)."""
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



