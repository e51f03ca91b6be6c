"""The audit chain anchored in the tenant's own bucket: signed checkpoints of its head.

The hash chain (``service.py``) shows that no sealed row changed *relative to the head*; but
whoever controls the database can rewrite rows and recompute every hash and the head. So,
while rows arrive, the sealer signs each tenant's head at least every
``MEMPLANE_AUDIT_CHECKPOINT_SECONDS`` (default 60) and writes it, create-only, into the
tenant's bucket, which the operator of the control plane does not control::

    <tenant prefix>/audit/checkpoints/<seq, 20 digits>.json
    {"format": "memplane-audit-checkpoint/1", "tenant_id", "seq", "row_hash",
     "prev_seq", "created_at", "key_id", "anchor", "moved_from"?, "signature"}

``anchor`` names the place it was written for; when the tenant's storage changed since the
last checkpoint, a move record ``<seq>-moved.json`` (the same fields and ``moved_to``) goes
into the old place first, and the new place's first checkpoint names the old one
(``moved_from``): see ``anchors.py``, which also says which places ``check`` reads.

Names sort by ``seq``, so the latest is the last of a listing. ``prev_seq`` names the
checkpoint before it: a checkpoint deleted from the middle leaves a dangling name. The
signature is the receipt signing key's (``control_plane/signing.py``), over the same canonical
form as receipts: one public key for a customer to pin, ``format`` keeping the two apart.

``check`` reads every checkpoint back, from every place the tenant anchored to, and holds the
database to it: each must carry a valid signature of this server's key for this tenant, and
the sealed row at its ``seq`` must have exactly its ``row_hash`` (which commits to every row
before it). The database's record of the latest checkpoint written (``anchored_seq``) must
be the latest found: higher, checkpoints were deleted; lower, the record was set back.

The bucket is never touched inside an open database transaction, and a bucket that cannot
be reached never stops sealing: the attempt is recorded (``anchor_problem``, a generic code)
and retried the next interval, and the lag shows in ``verify``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AccessLog, AuditHead, StorageConfig
from ..errors import DomainError, StorageMisconfigured
from ..plane.data_plane import DataPlane, Target
from ..settings import Settings
from ..signing import SigningKey, signing_key
from . import anchor_moves, anchors, tlog_anchor
from .anchors import FOLDER, FORMAT, checkpoint_name

log = logging.getLogger(__name__)


def _problem_code(exc: BaseException) -> str:
    """A generic code for why the bucket step failed; never the backend's own words."""
    if isinstance(exc, storage.StorageUnavailable):
        return "unreachable"
    if isinstance(exc, storage.StorageAuthError):
        return "auth_failed"
    if isinstance(exc, storage.ObjectNotFound):
        return "bucket_not_found"
    if isinstance(exc, storage.StorageError):
        return "storage_error"
    if isinstance(exc, DomainError):
        return exc.code[:64]
    return "error"


# -- writing ---------------------------------------------------------------------------------


def anchor_due(session: Session, plane: DataPlane, settings: Settings, *,
               now: datetime | None = None, seal: anchor_moves.Sealer | None = None) -> int:
    """Write a checkpoint for every tenant whose chain grew since its last checkpoint and
    whose last attempt is at least the checkpoint interval old. Returns how many were
    written. Called by the sealer after each round; safe on several replicas at once.
    The audit tree's tlog checkpoints (``tlog_anchor.py``), on their own interval, go first."""
    now = now or utcnow()
    try:
        tlog_anchor.publish_due(session, plane, settings, now=now)
    except Exception as exc:  # never holds up the chain's checkpoints
        session.rollback()
        log.warning("audit tlog checkpoints failed: %s", type(exc).__name__)
    cutoff = now - timedelta(seconds=settings.audit_checkpoint_seconds)
    session.rollback()
    due = session.scalars(select(AuditHead.tenant_id).where(*_due(cutoff))).all()
    session.rollback()
    written = 0
    for tenant_id in due:
        try:
            written += anchor(session, plane, settings, tenant_id, now=now, cutoff=cutoff,
                              seal=seal)
        except Exception as exc:  # one tenant's failure must not stop the others' anchoring
            session.rollback()
            log.warning("audit checkpoint for tenant %s failed: %s", tenant_id,
                        type(exc).__name__)
    return written


def _due(cutoff: datetime) -> tuple[Any, ...]:
    return (AuditHead.last_seq > AuditHead.anchored_seq,
            or_(AuditHead.anchor_attempted_at.is_(None),
                AuditHead.anchor_attempted_at <= cutoff))


def anchor(session: Session, plane: DataPlane, settings: Settings, tenant_id: uuid.UUID, *,
           now: datetime | None = None, cutoff: datetime | None = None,
           seal: anchor_moves.Sealer | None = None) -> bool:
    """Sign the tenant's current head and write it into its bucket; True if written.

    A move of the anchor is first a row of the log, sealed with ``seal`` (``service.seal``)
    and checkpointed in the old place (``anchor_moves.py``); without ``seal`` a move is not
    written (recorded as a problem and retried).

    Three steps, the bucket outside any transaction: claim the attempt (so replicas do not
    all write the same head) and read the head; sign and put the checkpoint; record the
    outcome. Without ``cutoff`` the head is anchored now whenever it moved.
    """
    now = now or utcnow()
    begin_write(session)
    conditions = (_due(cutoff) if cutoff is not None
                  else (AuditHead.last_seq > AuditHead.anchored_seq,))
    claimed = session.execute(
        update(AuditHead).where(AuditHead.tenant_id == tenant_id, *conditions)
        .values(anchor_attempted_at=now).execution_options(synchronize_session=False)
    )
    if getattr(claimed, "rowcount", 0) != 1:
        session.rollback()
        return False
    seq, row_hash, prev_seq, last_config = session.execute(
        select(AuditHead.last_seq, AuditHead.last_hash, AuditHead.anchored_seq,
               AuditHead.anchor_config_id)
        .where(AuditHead.tenant_id == tenant_id)
    ).one()
    session.commit()

    problem: str | None = None
    config_id: uuid.UUID | None = None
    try:
        target = plane.active(session, tenant_id)
        config_id = target.config_id
        config = session.get(StorageConfig, config_id)
        if config is None:
            raise StorageMisconfigured("the tenant's storage configuration is gone")
        here = anchors.place_of(config)
        before, before_id = anchors.previous(session, tenant_id, last_config)
        root = anchors.target_of(session, plane, anchors.root_of(tenant_id), None)
        old = _old_target(session, plane, before, before_id, root) if before != here else None
        session.rollback()  # nothing may stay open while the bucket is written
        key = signing_key(settings)
        body: dict[str, Any] = {
            "format": FORMAT, "tenant_id": str(tenant_id), "seq": int(seq),
            "row_hash": row_hash, "prev_seq": int(prev_seq), "created_at": now.isoformat(),
            "key_id": key.key_id, "anchor": here.describe(config_id)}
        if old is not None:  # the anchor moves: record it in the old place first
            move = {**body, "anchor": before.describe(before_id),
                    "moved_to": here.describe(config_id)}
            if seal is None:
                raise RuntimeError("the anchor moves, and the move is a row to seal first")
            move["tlog"], old = anchor_moves.checkpoint_move(  # the move, a row of the log
                session, settings, seal, tenant_id, int(prev_seq), here, config_id, old, root)
            _put_signed(key, move, old, root, anchors.checkpoint_name(int(seq), moved=True))
            body["moved_from"] = before.describe(before_id)
        _put_signed(key, body, target, None, checkpoint_name(int(seq)))
    except Exception as exc:  # the bucket or the key: recorded and retried next interval
        session.rollback()
        problem = _problem_code(exc)
        log.warning("audit checkpoint of tenant %s at row %s not written: %s",
                    tenant_id, seq, problem)

    begin_write(session)
    if problem is None:
        session.execute(
            update(AuditHead)
            .where(AuditHead.tenant_id == tenant_id, AuditHead.anchored_seq < seq)
            .values(anchored_seq=seq, anchored_at=now, anchor_problem=None,
                    anchor_config_id=config_id)
            .execution_options(synchronize_session=False))
    else:
        session.execute(
            update(AuditHead).where(AuditHead.tenant_id == tenant_id)
            .values(anchor_problem=problem).execution_options(synchronize_session=False))
    session.commit()
    return problem is None


def settle_unrecorded(session: Session, plane: DataPlane, settings: Settings,
                      tenant_id: uuid.UUID) -> bool:
    """Record a checkpoint a crash left written but unrecorded; True if one was.

    ``anchor`` puts the checkpoint, then records it; a process stopped in between leaves the
    bucket a checkpoint ahead of the database, which ``check`` would report as a record set
    back. Such a checkpoint is settled only if it is this server's (signed, read by
    ``survey``), sits in the tenant's active place, and the database shows its write
    claimed at the very moment it was signed and never finished; ``check`` still compares
    its row hash with the chain afterwards (tests/crashstates)."""
    head = session.get(AuditHead, tenant_id)
    if head is None or head.anchor_attempted_at is None or \
            head.anchored_at == head.anchor_attempted_at:
        session.rollback()
        return False
    attempted, anchored = head.anchor_attempted_at, int(head.anchored_seq)
    active = plane.active(session, tenant_id).config_id
    config = session.get(StorageConfig, active)
    found = anchors.survey(session, plane, signing_key(settings), tenant_id, active,
                           _problem_code)
    session.rollback()
    highest = max((f for f in found.found if not f.moved), key=lambda f: f.seq, default=None)
    if found.problem is not None or highest is None or highest.body is None \
            or highest.seq <= anchored or config is None \
            or highest.place != anchors.place_of(config):
        return False
    try:
        signed_at = datetime.fromisoformat(str(highest.body.get("created_at")))
    except ValueError:
        return False
    if signed_at != attempted:
        return False
    begin_write(session)
    settled = session.execute(
        update(AuditHead)
        .where(AuditHead.tenant_id == tenant_id, AuditHead.anchored_seq < highest.seq,
               AuditHead.anchor_attempted_at == attempted)
        .values(anchored_seq=highest.seq, anchored_at=attempted, anchor_problem=None,
                anchor_config_id=active)
        .execution_options(synchronize_session=False))
    session.commit()
    return getattr(settled, "rowcount", 0) == 1


def _old_target(session: Session, plane: DataPlane, place: anchors.Place,
                config_id: uuid.UUID | None, root: Target) -> Target:
    """Where the move record goes: the old place, or the root when the server can no longer
    reach the old place at all (its endpoint since refused, its credentials unreadable)."""
    try:
        return anchors.target_of(session, plane, place, config_id)
    except DomainError:
        return root


def _put_signed(key: SigningKey, body: dict[str, Any], target: Target,
                fallback: Target | None, name: str) -> None:
    """Sign ``body`` and write it create-only; a move record the old place no longer takes
    (its bucket gone, its credentials revoked) goes to the root instead."""
    body["signature"] = key.sign(body)
    data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    try:
        target.adapter.put(target.path(*FOLDER, name), data)
    except storage.ObjectExists:
        pass  # another sealer wrote this very head first
    except storage.StorageError:
        if fallback is None:
            raise
        try:
            fallback.adapter.put(fallback.path(*FOLDER, name), data)
        except storage.ObjectExists:
            pass


# -- checking --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointReport:
    """What the checkpoints in the tenant's places say about the database's chain."""

    checked: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    first_bad: int | None = None
    # The lowest row a failed checkpoint leaves uncovered (everything before it agreed).
    first_uncovered_row: int | None = None
    problem: str | None = None
    anchored_seq: int = 0
    anchored_at: datetime | None = None
    anchor_problem: str | None = None
    # Places read (the root, configurations, places move records name), moves recorded,
    # and configurations whose bucket could not be read but need not be.
    places: int = 0
    moves: int = 0
    unreadable: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.problem is None


# How long ``check`` waits for a checkpoint write it sees in flight (in the bucket, not yet
# recorded in the database) to be recorded.
IN_FLIGHT_SECONDS = 5.0


def check(session: Session, plane: DataPlane, settings: Settings,
          tenant_id: uuid.UUID) -> CheckpointReport:
    """Read every checkpoint in every place the tenant anchored to and compare the database
    with them (``anchors.py`` says which places and why)."""
    head = session.get(AuditHead, tenant_id)
    status = CheckpointReport(anchored_seq=int(head.anchored_seq) if head else 0,
                              anchored_at=head.anchored_at if head else None,
                              anchor_problem=head.anchor_problem if head else None)
    try:
        active = plane.active(session, tenant_id).config_id
        key = signing_key(settings)
    except Exception as exc:
        session.rollback()
        return replace(status, problem=f"the checkpoints in the tenant's bucket could not be "
                                       f"read ({_problem_code(exc)}); retry when the bucket is "
                                       "reachable")
    found = anchors.survey(session, plane, key, tenant_id, active, _problem_code)
    status = replace(status, places=len(found.read), unreadable=tuple(found.unreadable),
                     moves=sum(1 for f in found.found if f.moved))
    if found.problem is not None:
        bad = found.bad
        return replace(status, first_bad=bad.seq if bad else None,
                       first_uncovered_row=1 if bad else None, problem=found.problem)
    report = _compare(session, tenant_id, found.found, status)
    if not report.ok:
        return report
    root = anchors.root_of(tenant_id)
    moved = anchors.unlinked(found.found, root, found.read)
    if moved is not None:
        item, why = moved
        return replace(report, first_bad=item.seq, first_uncovered_row=1, problem=why)
    return _against_the_record(session, tenant_id, found.found, report)


def _against_the_record(session: Session, tenant_id: uuid.UUID, found: list[anchors.Found],
                        report: CheckpointReport) -> CheckpointReport:
    """The database's record of the latest checkpoint written must be the latest found: a
    higher one means checkpoints were deleted, a lower one that the record was set back."""
    highest = max((f for f in found if not f.moved), key=lambda f: f.seq, default=None)
    last = highest.seq if highest is not None else 0
    anchored = report.anchored_seq
    if anchored < last and highest is not None and highest.body is not None:
        anchored = _wait_in_flight(session, tenant_id, last, highest.body.get("created_at"))
    session.rollback()
    if anchored > last:
        return replace(report, first_bad=anchored, first_uncovered_row=last + 1,
                       problem=f"checkpoint {anchored} was written into the bucket but is "
                               "no longer there: checkpoints were deleted")
    if anchored < last:
        return replace(report, first_bad=last, first_uncovered_row=anchored + 1,
                       problem=f"{highest.where if highest else 'the bucket'} holds signed "
                               f"checkpoint {last}, but the database records checkpoints "
                               f"only up to row {anchored}: its record of the anchor was set "
                               "back")
    return report


def _wait_in_flight(session: Session, tenant_id: uuid.UUID, seq: int,
                    created_at: Any) -> int:
    """The database's ``anchored_seq`` once a checkpoint write seen in the bucket but not yet
    recorded is recorded. Only a write the database shows as claimed (and not finished) at
    the very moment the checkpoint was signed is waited for, and not for long; any other gap
    is an answer."""
    try:
        signed_at = datetime.fromisoformat(created_at) if isinstance(created_at, str) else None
    except ValueError:
        signed_at = None
    deadline = time.monotonic() + IN_FLIGHT_SECONDS
    while True:
        session.rollback()
        head = session.execute(
            select(AuditHead.anchored_seq, AuditHead.anchor_attempted_at,
                   AuditHead.anchored_at).where(AuditHead.tenant_id == tenant_id)).first()
        if head is None:
            return 0
        anchored, attempted, finished = int(head[0]), head[1], head[2]
        in_flight = (signed_at is not None and attempted == signed_at
                     and finished != attempted)
        if anchored >= seq or not in_flight or time.monotonic() > deadline:
            return anchored
        time.sleep(0.05)


def _compare(session: Session, tenant_id: uuid.UUID, found: list[anchors.Found],
             status: CheckpointReport, chunk: int = 1000) -> CheckpointReport:
    """Hold the database's chain to every checkpoint and move record found, in seq order;
    each checkpoint must follow one found (``prev_seq``), in whichever place."""
    plain = [f for f in found if not f.moved]
    if not found:
        return status
    seqs = {f.seq for f in plain}
    first = plain[0].seq if plain else None
    last = plain[-1].seq if plain else None
    covered = 0  # every row up to here agrees with a checkpoint
    checked = 0
    for start in range(0, len(found), chunk):
        batch = found[start:start + chunk]
        rows = dict(session.execute(
            select(AccessLog.seq, AccessLog.row_hash).where(
                AccessLog.tenant_id == tenant_id,
                AccessLog.seq.in_([f.seq for f in batch if f.body is not None]))).all())
        for item in batch:
            checked += 0 if item.moved else 1
            problem = item.problem
            if problem is None and item.body is not None:
                prev = item.body.get("prev_seq")
                stored = rows.get(item.seq)
                if isinstance(prev, int) and prev and prev not in seqs:
                    problem = (f"checkpoint {item.seq} follows checkpoint {prev}, which is "
                               "missing from the bucket: checkpoints were deleted")
                elif stored is None:
                    problem = (f"the database has no sealed row {item.seq}, which checkpoint "
                               f"{item.seq} signed: rows were removed")
                elif stored != item.body.get("row_hash"):
                    problem = (f"row {item.seq} in the database is not the row checkpoint "
                               f"{item.seq} signed at {item.body.get('created_at')}: rows "
                               f"{covered + 1} to {item.seq} were rewritten after it")
            if problem is not None:
                session.rollback()
                return replace(status, checked=max(checked, 1), first_seq=first,
                               last_seq=last, first_bad=item.seq,
                               first_uncovered_row=covered + 1, problem=problem)
            covered = max(covered, item.seq)
    session.rollback()
    return replace(status, checked=len(plain), first_seq=first, last_seq=last)
