"""The audit chain anchored in the tenant's own bucket: signed checkpoints of its head.

The hash chain (``service.py``) shows that no sealed row changed *relative to the head*; but
whoever controls the database can rewrite rows and recompute every hash and the head. So,
while rows arrive, the sealer signs each tenant's head at least every
``MEMPLANE_AUDIT_CHECKPOINT_SECONDS`` (default 60) and writes it, create-only, into the
tenant's bucket, which the operator of the control plane does not control::

    <tenant prefix>/audit/checkpoints/<seq, 20 digits>.json
    {"format": "memplane-audit-checkpoint/1", "tenant_id", "seq", "row_hash",
     "prev_seq", "created_at", "key_id", "signature"}

Names sort by ``seq``, so the latest is the last of a listing. ``prev_seq`` names the
checkpoint before it: a checkpoint deleted from the middle leaves a dangling name. The
signature is the receipt signing key's (``compliance/signing.py``), over the same canonical
form as receipts: one public key for a customer to pin, ``format`` keeping the two apart.

``check`` reads every checkpoint back and holds the database to it: each must carry a valid
signature of this server's key for this tenant, and the sealed row at its ``seq`` must have
exactly its ``row_hash`` (which commits to every row before it). The database's record of
the latest checkpoint written must be in the bucket too.

The bucket is never touched inside an open database transaction, and a bucket that cannot
be reached never stops sealing: the attempt is recorded (``anchor_problem``, a generic code)
and retried the next interval, and the lag shows in ``verify``.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidSignature
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.bounded import ObjectTooLarge

from ..compliance.signing import SigningKey, canonical, signing_key
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AccessLog, AuditHead
from ..errors import DomainError
from ..settings import Settings
from ..storage_config.plane import DataPlane, Target

log = logging.getLogger(__name__)

FORMAT = "memplane-audit-checkpoint/1"
FOLDER = ("audit", "checkpoints")
SEQ_DIGITS = 20


CHECKPOINT_READ_CEILING = 1 << 20
"""The most a checkpoint may take from the bucket (one signed JSON object of well under
1 KiB): a larger one is reported as altered, never read whole."""


def checkpoint_name(seq: int) -> str:
    return f"{seq:0{SEQ_DIGITS}d}.json"


def checkpoint_prefix(target: Target) -> str:
    return target.path(*FOLDER) + "/"


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
               now: datetime | None = None) -> int:
    """Write a checkpoint for every tenant whose chain grew since its last checkpoint and
    whose last attempt is at least the checkpoint interval old. Returns how many were
    written. Called by the sealer after each round; safe on several replicas at once."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=settings.audit_checkpoint_seconds)
    session.rollback()
    due = session.scalars(select(AuditHead.tenant_id).where(*_due(cutoff))).all()
    session.rollback()
    written = 0
    for tenant_id in due:
        try:
            written += anchor(session, plane, settings, tenant_id, now=now, cutoff=cutoff)
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
           now: datetime | None = None, cutoff: datetime | None = None) -> bool:
    """Sign the tenant's current head and write it into its bucket; True if written.

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
    seq, row_hash, prev_seq = session.execute(
        select(AuditHead.last_seq, AuditHead.last_hash, AuditHead.anchored_seq)
        .where(AuditHead.tenant_id == tenant_id)
    ).one()
    session.commit()

    problem: str | None = None
    config_id: uuid.UUID | None = None
    try:
        target = plane.active(session, tenant_id)
        session.rollback()  # nothing may stay open while the bucket is written
        config_id = target.config_id
        key = signing_key(settings)
        body = {"format": FORMAT, "tenant_id": str(tenant_id), "seq": int(seq),
                "row_hash": row_hash, "prev_seq": int(prev_seq),
                "created_at": now.isoformat(), "key_id": key.key_id}
        body["signature"] = key.sign(body)
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        try:
            target.adapter.put(target.path(*FOLDER, checkpoint_name(int(seq))), data)
        except storage.ObjectExists:
            pass  # another sealer anchored this very head first
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


# -- checking --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointReport:
    """What the bucket's checkpoints say about the database's chain."""

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

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class _Found:
    seq: int
    name: str
    body: dict[str, Any] | None
    problem: str | None


def check(session: Session, plane: DataPlane, settings: Settings,
          tenant_id: uuid.UUID) -> CheckpointReport:
    """Read every checkpoint in the tenant's bucket and compare the database with it."""
    head = session.get(AuditHead, tenant_id)
    anchored_seq = int(head.anchored_seq) if head else 0
    anchored_config = head.anchor_config_id if head else None
    status = CheckpointReport(anchored_seq=anchored_seq,
                              anchored_at=head.anchored_at if head else None,
                              anchor_problem=head.anchor_problem if head else None)
    try:
        target = plane.active(session, tenant_id)
        session.rollback()  # the bucket is read with no transaction open
        key = signing_key(settings)
        found = _read_all(target, key, tenant_id)
    except Exception as exc:
        session.rollback()
        return replace(status, problem=f"the checkpoints in the tenant's bucket could not be "
                                       f"read ({_problem_code(exc)}); retry when the bucket is "
                                       "reachable")
    report = _compare(session, tenant_id, found, status)
    if (report.ok and anchored_seq and anchored_config == target.config_id
            and (report.last_seq or 0) < anchored_seq):
        return replace(report, first_bad=anchored_seq,
                       first_uncovered_row=(report.last_seq or 0) + 1,
                       problem=f"checkpoint {anchored_seq} was written into the bucket but is "
                               "no longer there: checkpoints were deleted")
    return report


def _read_all(target: Target, key: SigningKey, tenant_id: uuid.UUID) -> list[_Found]:
    found = []
    for info in target.adapter.list(checkpoint_prefix(target)):
        name = info.path.rsplit("/", 1)[-1]
        stem = name.removesuffix(".json")
        if not (name.endswith(".json") and stem.isdigit()):
            continue
        found.append(_read_one(target, info.path, int(stem), key, tenant_id))
    return sorted(found, key=lambda f: f.seq)


def _read_one(target: Target, path: str, seq: int, key: SigningKey,
              tenant_id: uuid.UUID) -> _Found:
    name = path.rsplit("/", 1)[-1]

    def bad(why: str) -> _Found:
        return _Found(seq, name, None, f"checkpoint {seq} {why}")

    try:
        body = json.loads(target.adapter.get(path, CHECKPOINT_READ_CEILING),
                          object_pairs_hook=_refuse_duplicates)
    except ObjectTooLarge:
        return bad("in the bucket is larger than any checkpoint this server writes")
    except ValueError:
        return bad("in the bucket is not a well-formed checkpoint")
    if not isinstance(body, dict) or not _signed_by(key, body):
        return bad("in the bucket does not carry a valid signature of this server's "
                   "checkpoint key: it was forged or altered")
    if body.get("tenant_id") != str(tenant_id) or body.get("seq") != seq:
        return bad("in the bucket was signed for another tenant or another position")
    return _Found(seq, name, body, None)


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice")
    return dict(pairs)


def _signed_by(key: SigningKey, body: dict[str, Any]) -> bool:
    signature = body.get("signature")
    if (body.get("format") != FORMAT or body.get("key_id") != key.key_id
            or not isinstance(signature, str)):
        return False
    try:
        key.private.public_key().verify(base64.b64decode(signature, validate=True),
                                        canonical(body))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def _compare(session: Session, tenant_id: uuid.UUID, found: list[_Found],
             status: CheckpointReport, chunk: int = 1000) -> CheckpointReport:
    if not found:
        return status
    seqs = {f.seq for f in found}
    first, last = found[0].seq, found[-1].seq
    covered = 0  # every row up to here agrees with a checkpoint
    for start in range(0, len(found), chunk):
        batch = found[start:start + chunk]
        rows = dict(session.execute(
            select(AccessLog.seq, AccessLog.row_hash).where(
                AccessLog.tenant_id == tenant_id,
                AccessLog.seq.in_([f.seq for f in batch if f.body is not None]))).all())
        for index, item in enumerate(batch, start):
            problem = item.problem
            if problem is None and item.body is not None:
                prev = item.body.get("prev_seq")
                stored = rows.get(item.seq)
                if index and isinstance(prev, int) and prev >= first and prev not in seqs:
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
                return replace(status, checked=index + 1, first_seq=first, last_seq=last,
                               first_bad=item.seq, first_uncovered_row=covered + 1,
                               problem=problem)
            covered = item.seq
    session.rollback()
    return replace(status, checked=len(found), first_seq=first, last_seq=last)
