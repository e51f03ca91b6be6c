"""Settling what a crash left behind, and collecting objects no pointer names.

The reconciler looks at rows left ``pending_*`` for longer than a grace period and asks the
bucket: a ``pending_write`` whose object is present with the right hash is finished, any
other is rolled back; a ``pending_delete`` has its object deleted and its row removed.
Corrupt pointers are counted and reported, never served.

Orphan GC removes objects no pointer names — what a crash between "put" and "commit"
leaves, or a superseded version whose delete did not happen — in two phases, so that an
object is deleted only after two looks, a grace period apart, both found it unnamed:

1. **mark** lists the tenant's prefix and records each object older than the grace period
   that no pointer names as a candidate (``gc_candidates``);
2. **sweep**, on a later run, takes candidates marked at least a grace period ago, checks
   again that no pointer names them, turns them into tombstones, then deletes those objects
   (a candidate some pointer names by now is "rescued" and just forgotten). Tombstones are
   forgotten after ``TOMBSTONE_SECONDS``.

A write never adopts an object that is a candidate or a tombstone: its commit checks, and if
GC marked its new object while it was in flight (put before GC listed the prefix, commit
after), it puts a fresh one. So the sweep cannot delete an object a synced pointer names
(I1), whatever the grace period (``tests/faults/test_races_erasure_gc_export.py``).

Event bodies (``events/``, the raw log) are collected the same way: both phases list
``events/`` as well as ``memories/``, and an object is named if a pointer *or* an event row
names it (``_named``), so the body of every event survives and only a body whose append
crashed before its commit is removed. An append never adopts a candidate either
(``events.service``).

``collect_orphans`` runs mark then sweep, which is what ``memplane reconcile`` does; with a
grace period of zero both phases act in one run (tests, and an operator who knows the bucket
is quiet).

Both read more than one domain's rows (memory pointers and event rows name objects), so they
live with the integrity sweep, above memories and events.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from storage_adapters import base as storage
from storage_adapters.envelope import sealed_size

from ..audit import checkpoints
from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AuditHead, GcCandidate, MemoryPointer, StorageConfig, Tenant
from ..errors import DomainError
from ..events import repository as events_repo
from ..identity import Actor
from ..keys import subject_keys as keys
from ..kit import sha256_hex
from ..memories import repository as repo
from ..plane.data_plane import DataPlane
from ..settings import Settings

_BATCH = 500
_GC_BATCH = 1000
# How long a swept candidate stays as a tombstone: longer than any write can stay between its
# put and its commit (requests, statements and leases time out far sooner).
TOMBSTONE_SECONDS = 7 * 24 * 3600
# The content prefixes orphan GC lists: memory values, and event bodies.
_CONTENT_PREFIXES = ("memories", "events")


def _system(tenant_id: uuid.UUID, job: str) -> Actor:
    return Actor(tenant_id, "system", job)


@dataclass
class ReconcileReport:
    writes_completed: int = 0
    writes_rolled_back: int = 0
    deletes_completed: int = 0
    corrupt: int = 0
    checkpoints_recorded: int = 0
    errors: list[str] = field(default_factory=list)


def reconcile(session: Session, plane: DataPlane, *, grace_seconds: float,
              tenant_id: uuid.UUID | None = None,
              settings: Settings | None = None) -> ReconcileReport:
    """Settle what a crash left pending; with ``settings`` (the signing key) also audit
    checkpoints written into the bucket but not recorded."""
    report = ReconcileReport()
    before = utcnow() - timedelta(seconds=grace_seconds)
    _settle_writes(session, plane, before, tenant_id, report)
    _settle_deletes(session, plane, before, tenant_id, report)
    if settings is not None:
        _settle_checkpoints(session, plane, settings, tenant_id, report)
    query = select(func.count()).select_from(MemoryPointer).where(
        MemoryPointer.sync_status == "corrupt")
    if tenant_id is not None:
        query = query.where(MemoryPointer.tenant_id == tenant_id)
    report.corrupt = session.scalar(query) or 0
    session.commit()
    if plane.metrics is not None:
        count = plane.metrics.reconcile_actions.labels
        count("write_completed").inc(report.writes_completed)
        count("write_rolled_back").inc(report.writes_rolled_back)
        count("delete_completed").inc(report.deletes_completed)
    return report


def _settle_checkpoints(session: Session, plane: DataPlane, settings: Settings,
                        tenant_id: uuid.UUID | None, report: ReconcileReport) -> None:
    query = select(AuditHead.tenant_id).where(AuditHead.anchor_attempted_at.is_not(None),
                                              AuditHead.last_seq > AuditHead.anchored_seq)
    if tenant_id is not None:
        query = query.where(AuditHead.tenant_id == tenant_id)
    heads = list(session.scalars(query))
    session.commit()
    for tenant in heads:
        try:
            report.checkpoints_recorded += checkpoints.settle_unrecorded(
                session, plane, settings, tenant)
        except (DomainError, storage.StorageError) as exc:
            session.rollback()
            report.errors.append(f"audit checkpoint of tenant {tenant}: {exc}")


def _settle_writes(session: Session, plane: DataPlane, before, tenant_id, report) -> None:  # type: ignore[no-untyped-def]
    seen: set[uuid.UUID] = set()
    while True:
        rows = [p for p in repo.stale(session, "pending_write", before, _BATCH, tenant_id)
                if p.id not in seen]
        session.commit()
        if not rows:
            return
        for pointer in rows:
            seen.add(pointer.id)
            target = plane.by_id(session, pointer.storage_config_id)
            session.commit()
            try:
                blob = target.adapter.get(pointer.storage_path,
                                          sealed_size(pointer.content_size))
                assert plane.keys is not None
                data = keys.open_object(session, plane.keys, pointer.tenant_id,
                                        pointer.storage_path, pointer.id, blob)
                intact = sha256_hex(data) == pointer.content_sha256
            except storage.ObjectNotFound:
                intact = False
            except storage.IntegrityError:  # does not decrypt: not the object we meant
                intact = False
            except (storage.StorageError, DomainError) as exc:
                report.errors.append(f"{pointer.id}: {type(exc).__name__}")
                continue
            session.commit()
            begin_write(session)
            # Read again: the session keeps objects across commits, and a writer may have
            # overwritten or removed the row since it was listed.
            row = session.get(MemoryPointer, pointer.id, with_for_update=True,
                              populate_existing=True)
            if row is None or row.sync_status != "pending_write":
                session.rollback()
                continue
            actor = _system(row.tenant_id, "reconciler")
            if intact:
                row.sync_status, row.updated_at = "synced", utcnow()
                audit.record(session, actor, "reconcile", pointer_id=row.id,
                             detail="pending write completed")
                report.writes_completed += 1
            else:
                session.delete(row)
                audit.record(session, actor, "reconcile", pointer_id=row.id,
                             detail="pending write rolled back: object absent or different")
                report.writes_rolled_back += 1
            session.commit()
            if not intact:
                try:
                    target.delete([pointer.storage_path])
                except storage.StorageError:
                    pass  # orphan GC takes it later


def _settle_deletes(session: Session, plane: DataPlane, before, tenant_id, report) -> None:  # type: ignore[no-untyped-def]
    while True:
        rows = list(repo.stale(session, "pending_delete", before, _BATCH, tenant_id))
        session.commit()
        if not rows:
            return
        by_target: dict[uuid.UUID, list[MemoryPointer]] = {}
        for pointer in rows:
            by_target.setdefault(pointer.storage_config_id, []).append(pointer)
        settled: list[MemoryPointer] = []
        for config_id, pointers in by_target.items():
            target = plane.by_id(session, config_id)
            session.commit()
            try:
                target.delete([p.storage_path for p in pointers])
            except storage.StorageError as exc:
                report.errors.append(f"storage {config_id}: {type(exc).__name__}")
                continue
            settled += pointers
        if not settled:
            return
        begin_write(session)
        removed = repo.delete_pending(session, [p.id for p in settled])
        for pointer in settled:
            audit.record(session, _system(pointer.tenant_id, "reconciler"), "reconcile",
                         pointer_id=pointer.id, detail="pending delete completed")
        session.commit()
        report.deletes_completed += removed
        if len(settled) < len(rows):
            return


@dataclass
class GCReport:
    scanned: int = 0
    marked: int = 0
    young_kept: int = 0
    orphans_deleted: int = 0
    rescued: int = 0
    waiting: int = 0
    temporaries_removed: int = 0


def _configs(session: Session, tenant_id: uuid.UUID | None) -> list[StorageConfig]:
    query = select(StorageConfig)
    if tenant_id is not None:
        query = query.where(StorageConfig.tenant_id == tenant_id)
    configs = list(session.scalars(query.join(Tenant, Tenant.id == StorageConfig.tenant_id)))
    session.commit()
    return configs


def collect_orphans(session: Session, plane: DataPlane, *, grace_seconds: float,
                    tenant_id: uuid.UUID | None = None) -> GCReport:
    """Both phases, mark then sweep, over each tenant's ``memories/`` and ``events/``
    prefixes."""
    report = mark_orphans(session, plane, grace_seconds=grace_seconds, tenant_id=tenant_id)
    return sweep_orphans(session, plane, grace_seconds=grace_seconds, tenant_id=tenant_id,
                         report=report)


def mark_orphans(session: Session, plane: DataPlane, *, grace_seconds: float,
                 tenant_id: uuid.UUID | None = None,
                 report: GCReport | None = None) -> GCReport:
    """Phase 1: record objects older than the grace period that no pointer names."""
    report = report or GCReport()
    cutoff = utcnow() - timedelta(seconds=grace_seconds)
    for config in _configs(session, tenant_id):
        target = plane.by_id(session, config.id)
        session.commit()
        # A put killed mid-write leaves a temporary file (local buckets); gone after grace.
        sweep = getattr(target.adapter, "remove_stale_temporaries", None)
        if sweep is not None:
            report.temporaries_removed += sweep(cutoff.timestamp())
        for prefix in _CONTENT_PREFIXES:
            batch: list[str] = []
            for info in target.adapter.list(target.path(prefix) + "/"):
                report.scanned += 1
                if info.last_modified is not None and info.last_modified > cutoff:
                    report.young_kept += 1
                    continue
                batch.append(info.path)
                if len(batch) >= _GC_BATCH:
                    _mark(session, plane, config, batch, report)
                    batch = []
            if batch:
                _mark(session, plane, config, batch, report)
    return report


def _named(session: Session, config_id: uuid.UUID, paths: list[str]) -> set[str]:
    """The paths a memory pointer or an event row names."""
    return (repo.named_paths(session, config_id, paths)
            | events_repo.named_paths(session, config_id, paths))


def _mark(session: Session, plane: DataPlane, config: StorageConfig, paths: list[str],
          report: GCReport) -> None:
    named = _named(session, config.id, paths)
    known = repo.gc_marked(session, config.id, paths)
    fresh = [p for p in paths if p not in named and p not in known]
    # A tombstone still listed: its sweep committed, then its delete never reached the disk
    # (a crash in between, or one that undid the unlink). No write adopts a tombstone, so
    # it goes again now rather than after the tombstone expires (tests/crashstates).
    swept = set(session.scalars(select(GcCandidate.path).where(
        GcCandidate.storage_config_id == config.id, GcCandidate.path.in_(paths),
        GcCandidate.swept_at.is_not(None))))
    again = [p for p in paths if p in swept and p not in named]
    session.commit()
    if again:
        plane.by_id(session, config.id).delete(again)
        session.commit()
        report.orphans_deleted += len(again)
    if not fresh:
        return
    begin_write(session)
    repo.gc_mark(session, config.tenant_id, config.id, fresh, utcnow())
    audit.record(session, _system(config.tenant_id, "gc"), "gc_mark",
                 detail=f"marked {len(fresh)} unnamed object(s) for deletion after the grace "
                        f"period")
    session.commit()
    if plane.metrics is not None:
        plane.metrics.gc_objects.labels("marked").inc(len(fresh))
    report.marked += len(fresh)


def sweep_orphans(session: Session, plane: DataPlane, *, grace_seconds: float,
                  tenant_id: uuid.UUID | None = None,
                  report: GCReport | None = None) -> GCReport:
    """Phase 2: delete candidates marked a grace period ago that still no pointer names."""
    report = report or GCReport()
    before = utcnow() - timedelta(seconds=grace_seconds)
    for config in _configs(session, tenant_id):
        after = ""
        while True:
            due = list(repo.gc_due(session, config.id, before, after, _GC_BATCH))
            session.commit()
            if not due:
                break
            after = due[-1]
            deleted, rescued = _sweep(session, plane, config, due)
            report.orphans_deleted += deleted
            report.rescued += rescued
            if plane.metrics is not None:
                plane.metrics.gc_objects.labels("deleted").inc(deleted)
                plane.metrics.gc_objects.labels("rescued").inc(rescued)
        report.waiting += repo.gc_waiting(session, config.id, before)
        session.commit()
        begin_write(session)
        session.execute(delete(GcCandidate).where(
            GcCandidate.storage_config_id == config.id,
            GcCandidate.swept_at <= utcnow() - timedelta(seconds=TOMBSTONE_SECONDS)))
        session.commit()
    return report


def _sweep(session: Session, plane: DataPlane, config: StorageConfig,
           paths: list[str]) -> tuple[int, int]:
    begin_write(session)
    named = _named(session, config.id, paths)
    orphans = [p for p in paths if p not in named]
    # The candidates become tombstones before their objects go: a write still in flight that
    # put one of them sees the row at its commit and puts a fresh object instead of adopting
    # one this sweep deletes (``memories.hotpath``).
    if orphans:
        session.execute(update(GcCandidate)
                        .where(GcCandidate.storage_config_id == config.id,
                               GcCandidate.path.in_(orphans))
                        .values(swept_at=utcnow()))
    if named:
        repo.gc_unmark(session, config.id, sorted(named))
    session.commit()
    plane.checkpoint("gc:after_claim")
    if orphans:
        try:
            plane.by_id(session, config.id).delete(orphans)
        except Exception:
            session.rollback()
            begin_write(session)  # not deleted after all: candidates again, for the next sweep
            session.execute(update(GcCandidate)
                            .where(GcCandidate.storage_config_id == config.id,
                                   GcCandidate.path.in_(orphans))
                            .values(swept_at=None))
            session.commit()
            raise
    begin_write(session)
    audit.record(session, _system(config.tenant_id, "gc"), "gc",
                 detail=f"deleted {len(orphans)} orphaned object(s); {len(named)} candidate(s) "
                        f"named again, kept")
    session.commit()
    return len(orphans), len(named)
