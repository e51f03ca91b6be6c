"""Memories by key, the delete protocol: mark ``pending_delete`` (commit), delete the
object, delete the row with its audit row (commit; ``api.finish_deletes``). A crash in
between leaves a ``pending_delete`` row the reconciler finishes.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from ..addresses import MemoryAddress
from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..errors import NotFound
from ..holds.guard import ensure_writable
from ..holds.service import ensure_not_held, ensure_scope_not_held
from ..identity import EVERYTHING, Access, Actor
from ..plane.data_plane import DataPlane
from . import guesses
from . import repository as repo
from .api import finish_deletes
from .shared import ensure_in_scope

log = logging.getLogger(__name__)


_CLEAR_BATCH = 500


def delete_value(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
                 access: Access = EVERYTHING) -> None:
    """Delete the memory and its object. Safe to retry after a failure."""
    with audited(session, actor, "delete", detail=address.scope, private=address.personal):
        ensure_in_scope(session, actor, access, address, "delete")
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
        finish_deletes(session, plane, actor, [pointer], "delete")
        guesses.forget_row(actor.tenant_id, address)


def clear_scope(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress, *,
                access: Access = EVERYTHING) -> int:
    """Delete every memory of one scope ref, in batches."""
    deleted = 0
    with audited(session, actor, "clear", detail=address.scope, private=address.personal):
        ensure_in_scope(session, actor, access, address, "clear")
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
            deleted += finish_deletes(session, plane, actor, batch, "delete")
