"""A move of the anchor is itself a row of the log, checkpointed in the place it leaves.

When ``checkpoints.anchor`` finds the tenant's storage moved (``anchors.py``), before it
writes anything into the new place it: records an ``audit_anchor_moved`` row naming the new
place (``anchors.move_detail``), seals it into the tree, and writes into the old place a
checkpoint of the tree that holds it (with the consistency proof from the last one,
``tlog_anchor.py``'s layout). The signed move record it then writes into the old place
carries that row's proof (``tlog``: ``size``, ``seq``, ``leaf``, ``hashes``), and the tree's
checkpoints follow into the new place (``anchors.anchored_target``), the first with its
consistency proof from this one.

So, from the buckets alone (``offline.py``), the old place shows where the log went, and a
log that continues in another place with no such proven row in the place it left was moved
silently. The row is recorded once per move: a retried move finds it sealed.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AccessLog, AuditHead
from ..kit import request_id_var
from ..plane.data_plane import Target
from ..settings import Settings
from . import leaves, tree
from .anchors import MOVE_OPERATION, Place, move_detail
from .notes import signed_checkpoint
from .tlog_anchor import (
    TLOG,
    checkpoint_name,
    consistency_body,
    consistency_name,
    release,
    wait_for_claim,
)

#: Seals the tenant's pending rows (``service.seal``), handed in by the sealer's caller:
#: ``service`` reads the checkpoints, so this package's lower half never imports it.
Sealer = Callable[[Session, uuid.UUID], int]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def checkpoint_move(session: Session, settings: Settings, seal: Sealer, tenant_id: uuid.UUID,
                    since: int, to: Place, to_id: uuid.UUID | None, old: Target, root: Target
                    ) -> tuple[dict[str, Any], Target]:
    """Record the move to ``to`` (once: a row sealed after chain row ``since``, the last
    checkpointed, is reused), checkpoint it in ``old`` (``root`` if ``old`` takes no writes)
    and return its proof for the move record, and where the checkpoint went (the move record
    goes there too). Commits; writes the bucket with no transaction open."""
    detail = move_detail(to, to_id)
    seq = _move_row(session, tenant_id, since, detail)
    if seq is None:
        begin_write(session)
        session.add(AccessLog(tenant_id=tenant_id, accessor_type="system",
                              accessor_id="audit-anchor", operation=MOVE_OPERATION,
                              success=True, detail=detail, request_id=request_id_var.get(),
                              accessed_at=utcnow()))
        session.commit()
        seal(session, tenant_id)
        seq = _move_row(session, tenant_id, since, detail)
        if seq is None:
            raise RuntimeError("the anchor's move row was not sealed")
    until = wait_for_claim(session, tenant_id)  # one checkpoint writer at a time
    size: int | None = None
    try:
        previous = int(session.scalar(select(AuditHead.tlog_size)
                                      .where(AuditHead.tenant_id == tenant_id)) or 0)
        size, head = tree.head(session, tenant_id)
        row = session.scalars(select(AccessLog).where(AccessLog.tenant_id == tenant_id,
                                                      AccessLog.seq == seq)).one()
        leaf = leaves.leaf_bytes(row)
        hashes = tree.inclusion(session, tenant_id, seq, size)
        proof = (tree.consistency(session, tenant_id, previous, size)
                 if 0 < previous < size else None)
        session.rollback()  # nothing may stay open while the bucket is written
        objects = [(checkpoint_name(size), signed_checkpoint(settings, tenant_id, size,
                                                             head).encode())]
        if proof is not None:  # the proof first: no checkpoint is ever without it
            objects.insert(0, (consistency_name(previous, size),
                               consistency_body(previous, size, proof)))
        used = old
        try:
            _put(old, objects)
        except storage.StorageError:
            used = root  # the old place is gone: the root holds the move, as its record
            _put(root, objects)
    except BaseException:
        release(session, tenant_id, until)
        raise
    release(session, tenant_id, until, size)
    return {"size": size, "seq": seq, "leaf": _b64(leaf),
            "hashes": [_b64(h) for h in hashes]}, used


def _move_row(session: Session, tenant_id: uuid.UUID, since: int, detail: str) -> int | None:
    seq = session.scalar(select(AccessLog.seq).where(
        AccessLog.tenant_id == tenant_id, AccessLog.operation == MOVE_OPERATION,
        AccessLog.detail == detail, AccessLog.seq > since).order_by(AccessLog.seq.desc())
        .limit(1))
    session.rollback()
    return int(seq) if seq is not None else None


def _put(target: Target, objects: list[tuple[str, bytes]]) -> None:
    for name, data in objects:
        try:
            target.adapter.put(target.path(*TLOG, name), data)
        except storage.ObjectExists:
            pass  # written by an earlier attempt or another replica: the same bytes
