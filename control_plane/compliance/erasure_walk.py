"""An erasure's walk (steps 1–6 of ``erasure.py``): started and the subject's writes blocked,
then its compactor entries, pointers and events deleted batch by batch — each batch marked
``pending_delete``, its objects deleted (``erasure_bucket.py``), its rows deleted with one
audit row each and its counts saved in that transaction —, the prefixes swept, the subject
key destroyed, and everything checked gone. Each step is recorded in the job's progress when
finished, so a worker that takes over after a crash continues with the next one."""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from .. import idempotency
from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import (
    AccessLog,
    Compaction,
    CompactionEvent,
    Job,
    MemoryEvent,
    MemoryPointer,
    SubjectErasure,
)
from ..events import repository as events_repo
from ..jobs.service import JobContext
from ..kit import request_id_var
from ..plane.data_plane import Target, storage_errors
from . import erasure_derived as derived
from . import erasure_leftovers as leftovers
from . import subjects
from .erasure_bucket import SubjectObjects

log = logging.getLogger(__name__)

BATCH = 5000  # pointers per step: their objects' delete requests go out together


class ErasureWalk:
    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.session: Session = ctx.session
        self.user_id: str = ctx.subject or ""
        self.objects = SubjectObjects(self.session, self.user_id)

    @property
    def p(self) -> dict[str, Any]:
        return self.ctx.progress

    def count(self, name: str) -> int:
        return int(self.p.get(name, 0))

    def targets(self) -> list[Target]:
        found = subjects.targets(self.session, self.ctx.plane, self.ctx.tenant_id)
        self.session.commit()
        return found

    # 1
    def start(self) -> None:
        if "start_audit_id" in self.p:
            return
        begin_write(self.session)
        row = audit_row(self.session, self.ctx,
                        detail=f"job {self.ctx.job_id}: erasure started for a data subject")
        self.ctx.save(started_at=utcnow().isoformat(), start_audit_id=row.id,
                      pointers=0, objects=0, versions=0, orphans=0, exports=0, entries=0,
                      compactor_entries=0, events=0)
        self.session.commit()

    # 2
    def block(self) -> None:
        if self.p.get("blocked"):
            return
        begin_write(self.session)
        exists = self.session.get(SubjectErasure, (self.ctx.tenant_id, self.user_id))
        if exists is None:
            self.session.add(SubjectErasure(tenant_id=self.ctx.tenant_id, user_id=self.user_id,
                                            job_id=self.ctx.job_id, started_at=utcnow()))
        self.ctx.save(blocked=True)
        self.session.commit()
        self.ctx.checkpoint("after_block")

    # 3
    def delete_pointers(self) -> None:
        if self.p.get("pointers_done"):
            return
        started = datetime.fromisoformat(self.p["started_at"])
        while True:
            self.ctx.check()
            batch = list(self.session.execute(
                select(MemoryPointer.id, MemoryPointer.storage_config_id,
                       MemoryPointer.storage_path, MemoryPointer.embedding_storage_path,
                       MemoryPointer.key, MemoryPointer.memory_type)
                .where(subjects.owned_by(self.ctx.tenant_id, self.user_id))
                .order_by(MemoryPointer.id).limit(BATCH)).all())
            self.session.commit()
            if not batch:
                break
            ids = [p.id for p in batch]
            begin_write(self.session)
            # synchronize_session=False: the batch's objects need not follow (only their ids
            # and paths are used below); evaluating the criteria against every object in the
            # session cost more than the statement.
            self.session.execute(update(MemoryPointer).where(MemoryPointer.id.in_(ids))
                                 .values(sync_status="pending_delete", updated_at=utcnow())
                                 .execution_options(synchronize_session=False))
            self.session.commit()
            self.ctx.checkpoint("after_mark")
            derived.forget_in_search(self.ctx, ids)
            objects = versions = orphans = outside = 0
            by_config: dict[uuid.UUID, list[Any]] = defaultdict(list)
            for pointer in batch:
                by_config[pointer.storage_config_id].append(pointer)
            for config_id, pointers in by_config.items():
                target = self.ctx.plane.by_id(self.session, config_id)
                self.session.commit()
                counted = self.objects.delete_objects(target, pointers, started)
                objects += counted[0]
                versions += counted[1]
                orphans += counted[2]
                outside += counted[3]
            self.ctx.checkpoint("after_objects")
            begin_write(self.session)
            removed = self.session.execute(delete(MemoryPointer)
                                           .where(MemoryPointer.id.in_(ids))
                                           .execution_options(synchronize_session=False))
            audit.record_many(self.session, self.ctx.actor, "erase", [
                (pointer.id, f"job {self.ctx.job_id}: pointer and object deleted")
                for pointer in batch])
            idempotency.forget_subject(self.session, self.ctx.tenant_id, self.user_id, ids)
            for config_id, pointers in by_config.items():  # GC tombstones name the keys
                leftovers.forget_gc_dirs(self.session, config_id, pointers)
            self.ctx.save(
                pointers=self.count("pointers") + int(removed.rowcount),  # type: ignore[attr-defined]
                entries=self.count("entries") + sum(
                    1 for p in batch if p.key is None and p.memory_type == "entry"),
                objects=self.count("objects") + objects,
                versions=self.count("versions") + versions,
                orphans=self.count("orphans") + orphans,
                outside_checked=self.count("outside_checked") + outside,
            )
            self.session.commit()
            self.ctx.checkpoint("after_batch")
        begin_write(self.session)
        self.ctx.save(pointers_done=True)
        self.session.commit()

    # 3a
    def delete_compactor_entries(self) -> None:
        if self.p.get("compactions_done"):
            return
        while True:
            self.ctx.check()
            ids = list(self.session.scalars(
                derived.compactions_of(self.ctx.tenant_id, self.user_id).limit(BATCH)))
            entries = self.session.execute(
                select(MemoryPointer.id, MemoryPointer.storage_config_id,
                       MemoryPointer.storage_path, MemoryPointer.embedding_storage_path)
                .where(MemoryPointer.tenant_id == self.ctx.tenant_id,
                       MemoryPointer.id.in_(ids))).all() if ids else []
            self.session.commit()
            if not ids:
                break
            begin_write(self.session)
            self.session.execute(update(MemoryPointer)
                                 .where(MemoryPointer.id.in_([e.id for e in entries]))
                                 .values(sync_status="pending_delete", updated_at=utcnow())
                                 .execution_options(synchronize_session=False))
            self.session.commit()
            derived.forget_in_search(self.ctx, [e.id for e in entries])
            objects = 0
            for config_id, paths in _paths_by_config(
                    (e.storage_config_id, path) for e in entries
                    for path in (e.storage_path, e.embedding_storage_path) if path).items():
                target = self.ctx.plane.by_id(self.session, config_id)
                self.session.commit()
                with storage_errors():
                    target.delete(paths)
                self.objects.check_gone(target, paths)
                objects += len(paths)
            self.ctx.checkpoint("after_compactor_objects")
            begin_write(self.session)
            released = derived.release_others(self.session, self.ctx.tenant_id, self.user_id, ids)
            self.session.execute(delete(CompactionEvent)
                                 .where(CompactionEvent.compaction_id.in_(ids))
                                 .execution_options(synchronize_session=False))
            self.session.execute(delete(Compaction).where(Compaction.id.in_(ids))
                                 .execution_options(synchronize_session=False))
            removed = self.session.execute(delete(MemoryPointer)
                                           .where(MemoryPointer.id.in_([e.id for e in entries]))
                                           .execution_options(synchronize_session=False))
            audit.record_many(self.session, self.ctx.actor, "erase", [
                (entry.id, f"job {self.ctx.job_id}: compactor entry built from the subject's "
                           "events deleted") for entry in entries])
            self.ctx.save(
                **{name: self.count(name) + n for name, n in released.items()},
                compactor_entries=self.count("compactor_entries")
                + int(removed.rowcount),  # type: ignore[attr-defined]
                objects=self.count("objects") + objects)
            self.session.commit()
        begin_write(self.session)
        self.ctx.save(compactions_done=True)
        self.session.commit()

    # 3b
    def delete_events(self) -> None:
        if self.p.get("events_done"):
            return
        while True:
            self.ctx.check()
            batch = list(events_repo.subject_objects(self.session, self.ctx.tenant_id,
                                                     self.user_id, BATCH))
            self.session.commit()
            if not batch:
                break
            ids = [e.id for e in batch]
            begin_write(self.session)
            self.session.execute(update(MemoryEvent).where(MemoryEvent.id.in_(ids))
                                 .values(sync_status="pending_delete")
                                 .execution_options(synchronize_session=False))
            self.session.commit()
            for config_id, paths in _paths_by_config(
                    (e.storage_config_id, e.storage_path) for e in batch).items():
                target = self.ctx.plane.by_id(self.session, config_id)
                self.session.commit()
                with storage_errors():
                    target.delete(paths)
                self.objects.check_gone(target, paths)
            self.ctx.checkpoint("after_event_objects")
            begin_write(self.session)
            removed = self.session.execute(delete(MemoryEvent).where(MemoryEvent.id.in_(ids))
                                           .execution_options(synchronize_session=False))
            for event in batch:
                audit.record(self.session, self.ctx.actor, "erase", event_id=event.id,
                             detail=f"job {self.ctx.job_id}: event and its body deleted")
            self.ctx.save(events=self.count("events") + int(removed.rowcount),  # type: ignore[attr-defined]
                          objects=self.count("objects") + len(batch),
                          events_checked=self.count("events_checked") + len(batch))
            self.session.commit()
            self.ctx.checkpoint("after_event_batch")
        begin_write(self.session)
        self.ctx.save(events_done=True)
        self.session.commit()

    # 4
    def sweep(self) -> None:
        if self.p.get("swept"):
            return
        orphans = versions = exports = 0
        export_jobs = [j.id for j in self.session.scalars(
            select(Job).where(Job.tenant_id == self.ctx.tenant_id, Job.kind == "export",
                              Job.subject == self.user_id))]
        for target in self.targets():
            swept = self.objects.sweep(target, export_jobs)
            orphans += swept[0]
            versions += swept[1]
            exports += swept[2]
        begin_write(self.session)
        self.ctx.save(swept=True, orphans=self.count("orphans") + orphans,
                      versions=self.count("versions") + versions,
                      exports=self.count("exports") + exports)
        self.session.commit()
        self.ctx.checkpoint("after_sweep")

    # 5
    def destroy_keys(self) -> None:
        if "keys" in self.p:
            return
        shred = shredder()
        begin_write(self.session)
        if shred is None:
            keys: dict[str, Any] = {"destroyed": 0,
                                    "note": "no per-subject keys in this deployment"}
        else:
            keys = {"destroyed": int(shred(self.session, self.ctx.tenant_id, self.user_id)),
                    "method": "subject key destroyed (crypto-shredding): copies the bucket "
                              "still retains can no longer be decrypted"}
            if not self.session.in_transaction():
                begin_write(self.session)
        self.ctx.save(keys=keys)
        self.session.commit()
        self.ctx.checkpoint("after_keys")

    # 6
    def verify(self) -> bool:
        remaining_pointers = subjects.count_pointers(self.session, self.ctx.tenant_id,
                                                     self.user_id)
        remaining_events = events_repo.count_subject(self.session, self.ctx.tenant_id,
                                                     self.user_id)
        remaining_compactions = int(self.session.scalar(select(func.count()).select_from(
            derived.compactions_of(self.ctx.tenant_id, self.user_id).subquery())) or 0)
        self.session.commit()
        if remaining_pointers or remaining_events or remaining_compactions:
            log.warning("erasure %s: %d pointers, %d events, %d compactor entries reappeared; "
                        "another round", self.ctx.job_id, remaining_pointers,
                        remaining_events, remaining_compactions)
            return False
        remaining_objects = 0
        locations = 0
        for target in self.targets():
            locations += 1
            remaining_objects += self.objects.remaining(target)
        if remaining_objects:
            log.warning("erasure %s: %d objects reappeared; another round", self.ctx.job_id,
                        remaining_objects)
            return False
        begin_write(self.session)
        self.ctx.save(verification={"pointers_remaining": 0, "objects_remaining": 0,
                                    "events_remaining": 0, "compactor_entries_remaining": 0,
                                    "locations_listed": locations})
        self.session.commit()
        return True


def _paths_by_config(pairs: Any) -> dict[uuid.UUID, list[str]]:
    found: dict[uuid.UUID, list[str]] = defaultdict(list)
    for config_id, path in pairs:
        found[config_id].append(path)
    return found


def audit_row(session: Session, ctx: JobContext, *, detail: str) -> AccessLog:
    """An audit row whose id is needed: the receipt names the sequence range it covers."""
    row = AccessLog(tenant_id=ctx.tenant_id, accessor_type=ctx.actor.accessor_type,
                    accessor_id=ctx.actor.accessor_id, operation="erase", success=True,
                    detail=detail, request_id=request_id_var.get(), accessed_at=utcnow())
    session.add(row)
    session.flush()
    return row


def shredder() -> Any:
    """``control_plane.keys.subject_keys.shred_subject`` if per-subject keys exist here."""
    try:
        from ..keys import subject_keys as keys_service  # type: ignore[attr-defined,unused-ignore]
    except ModuleNotFoundError as exc:
        if exc.name in ("control_plane.keys", "control_plane.keys.subject_keys"):
            return None
        raise
    return getattr(keys_service, "shred_subject", None)
