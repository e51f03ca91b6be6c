"""Integrity sweep: re-read every object of a tenant, decrypt, hash, compare with its pointer.

For each pointer that should have content (``synced`` or ``corrupt``) the object is fetched,
opened with its subject key and hashed (I3). The sweep reports

- **missing** — the pointer names an object the bucket does not have;
- **corrupt** — the object does not decrypt (edited, truncated, swapped, another key, a
  shredded key) or its plaintext hash differs from the pointer's;
- **restored** — a pointer marked corrupt whose object is intact again;
- **orphaned** — objects under the tenant's ``memories/`` prefix that no pointer names
  (reported only; orphan GC deletes them).

Missing and corrupt pointers are marked ``corrupt`` and get an audit row each; the sweep
itself gets one summary row. It runs directly against the database and the buckets, so the
CLI (``memplane verify``) needs no server; the API runs it synchronously for now.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.envelope import DecryptionError, sealed_size

from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer, StorageConfig
from ..errors import HashMismatch
from ..identity import Actor
from ..keys import subject_keys as keys
from ..kit import sha256_hex
from ..memories import repository as memories_repo
from ..plane.data_plane import DataPlane, storage_errors
from ..plane.keyring import Keyring

_PAGE = 500
_LISTED_PROBLEMS = 100
_CHECKED = ("synced", "corrupt")

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Problem:
    pointer_id: uuid.UUID
    scope: str
    scope_ref: str
    key: str | None
    kind: str  # missing | corrupt
    reason: str


@dataclass
class IntegrityReport:
    tenant_id: uuid.UUID
    checked: int = 0
    ok: int = 0
    missing: int = 0
    corrupt: int = 0
    restored: int = 0
    objects: int = 0
    orphaned: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.missing == 0 and self.corrupt == 0


def verify_tenant(session: Session, plane: DataPlane, actor: Actor, *,
                  progress: Progress | None = None) -> IntegrityReport:
    """Check every object of ``actor.tenant_id``; commits its marks and audit rows."""
    tenant_id = actor.tenant_id
    report = IntegrityReport(tenant_id)
    ring = plane.keys
    assert ring is not None
    total = session.scalar(
        select(func.count()).select_from(MemoryPointer)
        .where(MemoryPointer.tenant_id == tenant_id, MemoryPointer.sync_status.in_(_CHECKED))
    ) or 0
    session.commit()
    after: uuid.UUID | None = None
    while True:
        query = (select(MemoryPointer)
                 .where(MemoryPointer.tenant_id == tenant_id,
                        MemoryPointer.sync_status.in_(_CHECKED))
                 .order_by(MemoryPointer.id).limit(_PAGE))
        if after is not None:
            query = query.where(MemoryPointer.id > after)
        page = list(session.scalars(query))
        session.commit()
        if not page:
            break
        after = page[-1].id
        for pointer in page:
            _check(session, plane, ring, actor, pointer, report)
            if progress is not None:
                progress(report.checked, total)
    _count_orphans(session, plane, tenant_id, report)
    begin_write(session)
    audit.record(session, actor, "integrity_verify", success=report.clean,
                 detail=f"checked {report.checked}: ok {report.ok}, missing {report.missing}, "
                        f"corrupt {report.corrupt}, restored {report.restored}, orphaned "
                        f"objects {report.orphaned} of {report.objects}")
    session.commit()
    return report


def _check(session: Session, plane: DataPlane, ring: Keyring, actor: Actor,
           pointer: MemoryPointer, report: IntegrityReport) -> None:
    report.checked += 1
    target = plane.by_id(session, pointer.storage_config_id)
    session.commit()
    kind, reason = None, ""
    try:
        with storage_errors(pointer.id):
            blob = target.adapter.get(pointer.storage_path, sealed_size(pointer.content_size))
        data = keys.open_object(session, ring, pointer.tenant_id, pointer.storage_path,
                                pointer.id, blob)
        if sha256_hex(data) != pointer.content_sha256:
            kind, reason = "corrupt", "the plaintext does not match the pointer's SHA-256"
    except storage.ObjectNotFound:
        kind, reason = "missing", "the object is missing from the bucket"
    except DecryptionError as exc:
        kind, reason = "corrupt", f"the object could not be decrypted ({exc})"
    except HashMismatch:  # the bucket's checksum failed, or more bytes than the pointer's
        kind, reason = "corrupt", "the object failed the bucket's checksum or is too large"
    session.commit()
    if kind is None:
        report.ok += 1
        if pointer.sync_status == "corrupt":
            begin_write(session)
            memories_repo.mark_synced(session, pointer.id, pointer.storage_path, utcnow())
            audit.record(session, actor, "integrity_verify", pointer_id=pointer.id,
                         detail="object intact again; pointer marked synced")
            session.commit()
            report.restored += 1
        return
    if kind == "missing":
        report.missing += 1
    else:
        report.corrupt += 1
    if len(report.problems) < _LISTED_PROBLEMS:
        report.problems.append(Problem(pointer.id, pointer.scope_type, pointer.scope_ref,
                                       pointer.key, kind, reason))
    begin_write(session)
    memories_repo.mark_corrupt(session, pointer.id, pointer.storage_path, utcnow())
    audit.record(session, actor, "integrity_verify", success=False, pointer_id=pointer.id,
                 detail=f"hash_mismatch: {reason}; expected {pointer.content_sha256}")
    session.commit()


def _count_orphans(session: Session, plane: DataPlane, tenant_id: uuid.UUID,
                   report: IntegrityReport) -> None:
    configs = list(session.scalars(select(StorageConfig.id)
                                   .where(StorageConfig.tenant_id == tenant_id)))
    session.commit()
    for config_id in configs:
        target = plane.by_id(session, config_id)
        session.commit()
        batch: list[str] = []
        for info in target.adapter.list(target.path("memories") + "/"):
            batch.append(info.path)
            if len(batch) >= _PAGE:
                _count_unnamed(session, config_id, batch, report)
                batch = []
        if batch:
            _count_unnamed(session, config_id, batch, report)


def _count_unnamed(session: Session, config_id: uuid.UUID, paths: list[str],
                   report: IntegrityReport) -> None:
    named = memories_repo.named_paths(session, config_id, paths)
    session.commit()
    report.objects += len(paths)
    report.orphaned += len(paths) - len(named)


def verify_as(session: Session, plane: DataPlane, actor: Actor) -> IntegrityReport:
    """The API's entry point: failures are audited too."""
    with audit.audited(session, actor, "integrity_verify"):
        return verify_tenant(session, plane, actor)
