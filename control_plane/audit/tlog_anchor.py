"""The audit tree's signed checkpoints written into the tenant's bucket, each with the
consistency proof from the one before, so that the log can be checked from the bucket and
the verifier key alone.

While a tenant's tree grows, the sealer (``checkpoints.anchor_due``, after each round) signs
its head at most every ``MEMPLANE_AUDIT_TLOG_CHECKPOINT_SECONDS`` (default 5) and writes,
create-only, beside the signed JSON checkpoints of the hash chain (``checkpoints.py``), into
the place those go now::

    <tenant prefix>/audit/checkpoints/tlog/consistency/<previous size>-<size>   (20 digits each)
        {"first": <previous size>, "second": <size>, "hashes": [base64, …]}
    <tenant prefix>/audit/checkpoints/tlog/checkpoint/<size, 20 digits>
        the C2SP signed note (``notes.signed_checkpoint``)

The consistency proof goes first, so every checkpoint in the bucket has its proof from the
previous one beside it (the first checkpoint has none: there is nothing before it). The
previous size is the database's record of the last checkpoint written (``tlog_size``),
moved on only once both objects are in. One writer at a time: two that started from the same
previous size would each write a checkpoint, with no proof between the two, and verification
would refuse the log. A writer holds the tenant's head (``tlog_claimed_until``) from reading
the previous size until it has recorded its own; a lease (``LEASE``) so that a writer that
died does not stop the log. Both are deterministic — the same size gives the
same bytes (Ed25519 signs deterministically) — so a write another replica made first is
taken as done. A bucket that cannot be reached never stops sealing: the attempt is logged
and retried the next interval.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AuditHead
from ..plane.data_plane import DataPlane, Target
from ..settings import Settings
from . import anchors, tree, witnesses
from .anchors import FOLDER, SEQ_DIGITS
from .notes import encoded, signed_checkpoint

log = logging.getLogger(__name__)

TLOG = (*FOLDER, "tlog")
# Longer than a checkpoint's writer may take: two bucket calls, each bounded by the bucket's
# call deadline (storage_adapters/bounded), and three short transactions.
LEASE = timedelta(seconds=120)


def checkpoint_name(size: int) -> str:
    return f"checkpoint/{size:0{SEQ_DIGITS}d}"


def consistency_name(first: int, second: int) -> str:
    return f"consistency/{first:0{SEQ_DIGITS}d}-{second:0{SEQ_DIGITS}d}"


def consistency_body(first: int, second: int, hashes: list[bytes]) -> bytes:
    return json.dumps({"first": first, "second": second,
                       "hashes": encoded(hashes)},
                      sort_keys=True, separators=(",", ":")).encode()


def claim(session: Session, tenant_id: uuid.UUID, *conditions: Any,
          attempted: datetime | None = None) -> datetime | None:
    """Take the tenant's checkpoint writing if no one holds it (and ``conditions`` hold),
    in a transaction of its own; the lease's end, which ``release`` names, or None."""
    begin_write(session)
    now = utcnow()
    values: dict[str, Any] = {"tlog_claimed_until": now + LEASE}
    if attempted is not None:
        values["tlog_attempted_at"] = attempted
    claimed = session.execute(
        update(AuditHead).where(AuditHead.tenant_id == tenant_id, *conditions,
                                or_(AuditHead.tlog_claimed_until.is_(None),
                                    AuditHead.tlog_claimed_until <= now))
        .values(**values).execution_options(synchronize_session=False))
    if getattr(claimed, "rowcount", 0) != 1:
        session.rollback()
        return None
    session.commit()
    return now + LEASE


def wait_for_claim(session: Session, tenant_id: uuid.UUID,
                   pause: Callable[[float], None] = time.sleep) -> datetime:
    """``claim`` the tenant's checkpoint writing whatever is due, waiting for a writer that
    holds it (at most ``LEASE``: a writer that died lets go when its lease runs out)."""
    while True:
        until = claim(session, tenant_id)
        if until is not None:
            return until
        pause(0.05)


def release(session: Session, tenant_id: uuid.UUID, until: datetime,
            size: int | None = None) -> None:
    """Let go of the lease ``claim`` gave (not one another writer took after it ran out),
    recording ``size`` as the last checkpoint written if it is larger."""
    session.rollback()
    begin_write(session)
    mine = (AuditHead.tenant_id == tenant_id, AuditHead.tlog_claimed_until == until)
    if size is not None:
        session.execute(
            update(AuditHead).where(AuditHead.tenant_id == tenant_id,
                                    AuditHead.tlog_size < size)
            .values(tlog_size=size).execution_options(synchronize_session=False))
    session.execute(update(AuditHead).where(*mine).values(tlog_claimed_until=None)
                    .execution_options(synchronize_session=False))
    session.commit()


def _due(cutoff: datetime | None) -> tuple[Any, ...]:
    grown = AuditHead.tree_size > AuditHead.tlog_size
    if cutoff is None:
        return (grown,)
    return (grown, or_(AuditHead.tlog_attempted_at.is_(None),
                       AuditHead.tlog_attempted_at <= cutoff))


def publish_due(session: Session, plane: DataPlane, settings: Settings, *,
                now: datetime | None = None) -> int:
    """Write a checkpoint for every tenant whose tree grew since its last one and whose last
    attempt is at least the interval old; returns how many were written. Safe on several
    replicas at once."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=settings.audit_tlog_checkpoint_seconds)
    session.rollback()
    due = session.scalars(select(AuditHead.tenant_id).where(*_due(cutoff))).all()
    session.rollback()
    written = 0
    for tenant_id in due:
        try:
            written += publish(session, plane, settings, tenant_id, now=now, cutoff=cutoff)
        except Exception as exc:  # one tenant's failure must not stop the others'
            session.rollback()
            log.warning("audit tlog checkpoint for tenant %s failed: %s", tenant_id,
                        type(exc).__name__)
    return written


def publish(session: Session, plane: DataPlane, settings: Settings, tenant_id: uuid.UUID, *,
            now: datetime | None = None, cutoff: datetime | None = None) -> bool:
    """Sign the tenant's tree now and write the checkpoint and its consistency proof into its
    bucket; True if written. Claims the attempt first (so replicas do not all write), reads
    the tree, then writes with no transaction open, then records the size. Without
    ``cutoff`` it writes whenever the tree grew."""
    until = claim(session, tenant_id, *_due(cutoff), attempted=now or utcnow())
    if until is None:
        return False
    written: int | None = None
    try:
        size, previous = session.execute(
            select(AuditHead.tree_size, AuditHead.tlog_size)
            .where(AuditHead.tenant_id == tenant_id)).one()
        size, previous = int(size), int(previous)
        _, root = tree.head(session, tenant_id, size)
        proof = tree.consistency(session, tenant_id, previous, size) if previous else None
        session.rollback()
        try:
            target = anchors.anchored_target(session, plane, tenant_id)  # anchor_moves.py
            session.rollback()  # nothing may stay open while the bucket is written
            plane.checkpoint("tlog:claimed")
            if proof is not None:
                _put(target, consistency_name(previous, size),
                     consistency_body(previous, size, proof))
            note = signed_checkpoint(settings, tenant_id, size, root)
            _put(target, checkpoint_name(size), note.encode())
        except Exception as exc:  # the bucket or the key: retried next interval
            session.rollback()
            log.warning("audit tlog checkpoint of tenant %s at size %s not written: %s",
                        tenant_id, size, type(exc).__name__)
            return False
        written = size
    finally:
        release(session, tenant_id, until, written)
    _cosign(session, settings, target, tenant_id, note, previous, proof or [])
    return True


def _cosign(session: Session, settings: Settings, target: Target, tenant_id: uuid.UUID,
            signed: str, previous: int, proof: list[bytes]) -> None:
    """The tenant's witnesses' cosignatures of the checkpoint just written, stored beside it
    (``witnesses.py``). A witness that refuses or cannot be reached never stops the log: its
    outcome is recorded on its row, and the next checkpoint is sent to it again."""
    def prove(first: int, second: int) -> list[bytes]:
        try:
            return tree.consistency(session, tenant_id, first, second)
        finally:
            session.rollback()
    try:
        witnesses.cosign_and_store(session, settings, target, tenant_id, signed, previous,
                                   proof, prove=prove)
    except Exception as exc:  # the bucket: the next checkpoint is cosigned instead
        session.rollback()
        log.warning("audit checkpoint of tenant %s not cosigned: %s", tenant_id,
                    type(exc).__name__)


def _put(target: Target, name: str, data: bytes) -> None:
    try:
        target.adapter.put(target.path(*TLOG, name), data)
    except storage.ObjectExists:
        pass  # another sealer wrote this very object first (the same bytes)
