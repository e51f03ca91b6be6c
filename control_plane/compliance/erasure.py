"""Erasure of a data subject (GDPR Art. 17): a resumable, idempotent job (DESIGN §7, I4).

Steps, each recorded in the job's ``progress`` when finished, so a worker that takes over
after a crash continues with the next one:

1. **start** — the start time and the first audit row of the erasure (naming the job, not
   the subject);
2. **block** — a ``subject_erasures`` row: memory writes, appends and deletes of the subject
   answer 409 ``subject_erasure_in_progress`` until the receipt is written;
3a. **compactor entries** built from the subject's events (the ``compactions`` and
   ``compaction_events`` provenance names them), and any built from events that no longer
   exist: mark their pointers ``pending_delete``, delete their objects (all versions) and
   check by listing that they are gone, then delete the pointers and their provenance rows
   (other subjects' events they covered lose ``compressed_at``: ``erasure_derived.py``);
3. **delete**, in batches of the subject's pointers (``user_id`` = subject, or scope ``user``
   with ``scope_ref`` = subject): mark them ``pending_delete`` (reads stop), delete their
   objects (``delete_many``; on a versioned bucket every version and delete marker of each
   path outside the subject's prefix is purged), delete the rows with one audit row each.
   Objects outside the subject's prefix (conversation, agent … scopes) are verified right
   away by listing their scope directories; superseded copies of those keys that no pointer
   names and that predate the erasure are removed too. A batch's counts are saved in the
   transaction that deletes its rows, so a crash never counts anything twice. Memories by
   key and curated entries (key null, memory type ``entry``) are counted apart;
3b. **events**, in batches of the subject's raw events (``user_id`` = subject, or scope
   ``user``/subject): mark them ``pending_delete`` (reads stop), delete their bodies (all
   versions), list each month directory that held one to check they are gone, then delete
   the rows with one audit row each;
4. **sweep** — every object (and, on a versioned bucket, every version and marker) left under
   ``memories/user/<subject>/`` and ``events/user/<subject>/`` in each of the tenant's bucket
   locations, plus the archives of
   the subject's earlier exports;
5. **keys** — the subject's encryption key is destroyed through
   ``control_plane.keys.subject_keys.shred_subject`` when that module is installed;
6. **verify** — count queries on the pointers, the events and the compactor entries built
   from them, and a listing of every version under the subject's prefixes must all come back
   empty (if a write slipped in, the job goes back to step 3a);
7. **receipt** — the last audit row, the audit chain sealed, an Ed25519-signed receipt stored
   (see ``receipts.py``), the write block lifted, and nothing personal of the subject left in
   the control plane: this job and the subject's earlier exports keep only a keyed hash of
   the id (``pseudonyms.py``: the database alone cannot test a guess against it), the
   destroyed key's tombstone is renamed to that hash, the
   subject's idempotency answers are deleted (step 3 deletes those of each batch), and on
   SQLite the write-ahead log is checkpointed and truncated so that, with
   ``secure_delete``, no freed page keeps an old row (``db.engine.scrub_freed``).

Audit rows need no rewriting: they never held the subject's identifiers in clear, only
sealed under the subject's key, which step 5 destroys (``audit/sealed.py``); the chain, which
covers the sealed bytes, still verifies.

A write of the subject that looked up its key before the block and puts its object later
never lands an object behind the receipt: until the receipt its commit sees the block (409,
its object deleted); after the receipt its commit finds the key it sealed under destroyed
(step 5), so it never adopts that object — it deletes it and, as a new write after the
erasure, seals a fresh object under a new key (``memories.hotpath``; the key check holds a
share lock, so step 5 waits for a commit in progress and step 6 then sees its pointer).
``tests/faults/test_races_erasure_gc_export.py`` pauses the two at every step.

A second erasure of the same subject finds nothing, deletes nothing and says so in its
result and receipt. A dry run counts what would be deleted and deletes nothing.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from storage_adapters import base as storage

from .. import idempotency
from ..audit import service as audit
from ..conversations import repository as conversations
from ..db.base import new_id, utcnow
from ..db.engine import begin_write, scrub_freed
from ..db.models import (
    AccessLog,
    Compaction,
    CompactionEvent,
    Job,
    MemoryEvent,
    MemoryPointer,
    SubjectErasure,
    SubjectKey,
)
from ..events import repository as events_repo
from ..holds.service import ensure_subject_not_held
from ..jobs.service import JobContext
from ..keys import repository as keys_repo
from ..kit import request_id_var
from ..memories import repository as memories_repo
from ..plane.data_plane import Target, storage_errors
from . import erasure_derived as derived
from . import erasure_leftovers as leftovers
from . import pseudonyms, receipts, subjects

log = logging.getLogger(__name__)

BATCH = 5000  # pointers per step: their objects' delete requests go out together
MAX_ROUNDS = 3


class ErasureIncomplete(Exception):
    """Verification found something of the subject still present."""


def run(ctx: JobContext) -> dict[str, Any]:
    if ctx.params.get("dry_run"):
        return _plan(ctx)
    if "receipt_id" in ctx.progress and "result" in ctx.progress:
        return dict(ctx.progress["result"])
    assert ctx.subject is not None
    if "start_audit_id" not in ctx.progress:
        # A hold placed after the request refuses the erasure before anything is deleted;
        # once it has started, placing a hold on the subject is refused instead (holds).
        ensure_subject_not_held(ctx.session, ctx.tenant_id, ctx.subject)
        ctx.session.rollback()
    run = _Erasure(ctx)
    run.start()
    run.block()
    for _ in range(MAX_ROUNDS):
        run.delete_compactor_entries()
        run.delete_pointers()
        run.delete_events()
        run.sweep()
        run.destroy_keys()
        if run.verify():
            break
        ctx.commit_progress(compactions_done=False, pointers_done=False, events_done=False,
                            swept=False)
    else:
        raise ErasureIncomplete("writes kept reappearing for the subject; rerun the erasure")
    if not ctx.progress.get("search_dropped"):
        leftovers.drop_search(ctx, run.user_id, run._targets())
    return run.finish()


class _Erasure:
    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.session: Session = ctx.session
        self.user_id: str = ctx.subject or ""
        self._descriptions: dict[uuid.UUID, storage.BucketDescription] = {}

    @property
    def p(self) -> dict[str, Any]:
        return self.ctx.progress

    def _count(self, name: str) -> int:
        return int(self.p.get(name, 0))

    def _versioned(self, target: Target) -> bool:
        return bool(getattr(target, "versioned", False)) or self._describe(target).versioning

    def _describe(self, target: Target) -> storage.BucketDescription:
        if target.config_id not in self._descriptions:
            with storage_errors():
                self._descriptions[target.config_id] = target.adapter.describe()
        return self._descriptions[target.config_id]

    def _targets(self) -> list[Target]:
        found = subjects.targets(self.session, self.ctx.plane, self.ctx.tenant_id)
        self.session.commit()
        return found

    # 1
    def start(self) -> None:
        if "start_audit_id" in self.p:
            return
        begin_write(self.session)
        row = _audit_row(self.session, self.ctx,
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
                counted = self._delete_objects(target, pointers, started)
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
                pointers=self._count("pointers") + int(removed.rowcount),  # type: ignore[attr-defined]
                entries=self._count("entries") + sum(
                    1 for p in batch if p.key is None and p.memory_type == "entry"),
                objects=self._count("objects") + objects,
                versions=self._count("versions") + versions,
                orphans=self._count("orphans") + orphans,
                outside_checked=self._count("outside_checked") + outside,
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
                self._check_gone(target, paths)
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
                **{name: self._count(name) + n for name, n in released.items()},
                compactor_entries=self._count("compactor_entries")
                + int(removed.rowcount),  # type: ignore[attr-defined]
                objects=self._count("objects") + objects)
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
                self._check_gone(target, paths)
            self.ctx.checkpoint("after_event_objects")
            begin_write(self.session)
            removed = self.session.execute(delete(MemoryEvent).where(MemoryEvent.id.in_(ids))
                                           .execution_options(synchronize_session=False))
            for event in batch:
                audit.record(self.session, self.ctx.actor, "erase", event_id=event.id,
                             detail=f"job {self.ctx.job_id}: event and its body deleted")
            self.ctx.save(events=self._count("events") + int(removed.rowcount),  # type: ignore[attr-defined]
                          objects=self._count("objects") + len(batch),
                          events_checked=self._count("events_checked") + len(batch))
            self.session.commit()
            self.ctx.checkpoint("after_event_batch")
        begin_write(self.session)
        self.ctx.save(events_done=True)
        self.session.commit()

    def _check_gone(self, target: Target, deleted: list[str]) -> None:
        """List each directory that held a deleted object: none may still be there (on a
        versioned bucket, no version or marker of it either)."""
        gone = set(deleted)
        versioned = self._versioned(target)
        with storage_errors():
            for directory in sorted({path.rsplit("/", 1)[0] + "/" for path in deleted}):
                listing = (target.adapter.list_versions(directory) if versioned
                           else target.adapter.list(directory))
                if any(entry.path in gone for entry in listing):
                    raise ErasureIncomplete("an object of the subject is still listed after "
                                            "its deletion")

    def _delete_objects(self, target: Target, pointers: list[Any],
                        started: datetime) -> tuple[int, int, int, int]:
        """Delete the batch's objects in one location; verify the ones outside the prefix."""
        inside = target.path(subjects.user_prefix(self.user_id))
        paths = [p.storage_path for p in pointers]
        paths += [p.embedding_storage_path for p in pointers if p.embedding_storage_path]
        outside = [path for path in paths if not path.startswith(inside)]
        versions = 0
        with storage_errors():
            if self._versioned(target):
                # Inside the subject's prefix a delete marker is enough for now: the sweep
                # purges every version and marker there in one listing.
                inside_paths = [path for path in paths if path.startswith(inside)]
                if inside_paths:
                    target.adapter.delete_many(inside_paths)
                if outside:  # one listing per scope directory, deletes in batches
                    purged = storage.purge_paths(target.adapter, outside)
                    # each path's current version is counted as an object already
                    versions += max(0, purged - len(outside))
            else:
                target.adapter.delete_many(paths)
        orphans = self._check_outside(target, outside, started)
        return len(paths), versions, orphans, len(outside)

    def _check_outside(self, target: Target, deleted: list[str], started: datetime) -> int:
        """List each scope directory that held a deleted object outside the subject's prefix:
        none of the deleted objects may remain; older copies of the same keys that no pointer
        names (superseded versions a crash left) are removed as well."""
        if not deleted:
            return 0
        gone = set(deleted)
        key_dirs = {path.rsplit("/", 1)[0] + "/" for path in deleted}
        scope_dirs = {key.rstrip("/").rsplit("/", 1)[0] + "/" for key in key_dirs}
        versioned = self._versioned(target)
        leftovers: list[str] = []
        with storage_errors():
            for scope_dir in sorted(scope_dirs):
                listing = (target.adapter.list_versions(scope_dir) if versioned
                           else target.adapter.list(scope_dir))
                for entry in listing:
                    if entry.path in gone:
                        raise ErasureIncomplete("an object of the subject is still listed "
                                                "after its deletion")
                    if (entry.path.rsplit("/", 1)[0] + "/" in key_dirs
                            and entry.last_modified is not None
                            and entry.last_modified < started):
                        leftovers.append(entry.path)
        if not leftovers:
            return 0
        named = memories_repo.named_paths(self.session, target.config_id, leftovers)
        self.session.commit()
        orphans = sorted(set(leftovers) - named)
        with storage_errors():
            if versioned:
                for path in orphans:
                    target.adapter.purge_versions(path)
            else:
                target.adapter.delete_many(orphans)
        return len(orphans)

    # 4
    def sweep(self) -> None:
        if self.p.get("swept"):
            return
        orphans = versions = exports = 0
        prefix = subjects.user_prefix(self.user_id)
        export_jobs = [j.id for j in self.session.scalars(
            select(Job).where(Job.tenant_id == self.ctx.tenant_id, Job.kind == "export",
                              Job.subject == self.user_id))]
        for target in self._targets():
            with storage_errors():
                for full in (target.path(prefix), target.path(_events_prefix(self.user_id))):
                    listed = [info.path for info in target.adapter.list(full)]
                    orphans += target.adapter.delete_many(listed) if listed else 0
                    if self._versioned(target):
                        versions += target.adapter.purge_versions(full)
                for job_id in export_jobs:
                    export_prefix = target.path("exports", str(job_id)) + "/"
                    found = [info.path for info in target.adapter.list(export_prefix)]
                    exports += len(found)
                    if found:
                        target.adapter.delete_many(found)
                    if self._versioned(target):
                        target.adapter.purge_versions(export_prefix)
        begin_write(self.session)
        self.ctx.save(swept=True, orphans=self._count("orphans") + orphans,
                      versions=self._count("versions") + versions,
                      exports=self._count("exports") + exports)
        self.session.commit()
        self.ctx.checkpoint("after_sweep")

    # 5
    def destroy_keys(self) -> None:
        if "keys" in self.p:
            return
        shred = _shredder()
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
        for target in self._targets():
            locations += 1
            with storage_errors():
                for prefix in (subjects.user_prefix(self.user_id),
                               _events_prefix(self.user_id)):
                    remaining_objects += sum(1 for _ in target.adapter.list_versions(
                        target.path(prefix)))
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

    # 7
    def finish(self) -> dict[str, Any]:
        if "receipt_id" not in self.p:
            begin_write(self.session)
            receipt_id = new_id()
            row = _audit_row(self.session, self.ctx,
                             detail=f"job {self.ctx.job_id}: erasure completed; "
                                          f"receipt {receipt_id}")
            self.ctx.save(receipt_id=str(receipt_id), end_audit_id=row.id,
                          finished_at=utcnow().isoformat())
            self.session.commit()
        self.ctx.checkpoint("before_receipt")
        receipt_id = uuid.UUID(self.p["receipt_id"])
        audit.seal(self.session, self.ctx.tenant_id)
        counts = {name: self._count(name)
                  for name in ("pointers", "objects", "versions", "orphans", "exports",
                               "events", "entries", "compactor_entries", *derived.COUNTS)}
        work_done = any(counts.values()) or bool(self.p["keys"]["destroyed"])
        targets = self._targets()
        descriptions = [(t.config_id, self._describe(t)) for t in targets]
        begin_write(self.session)
        body = receipts.build(
            self.session, receipt_id=receipt_id, job_id=self.ctx.job_id,
            tenant_id=self.ctx.tenant_id, user_id=self.user_id, progress=self.p,
            counts=counts, descriptions=descriptions, work_done=work_done,
            credentials=self.ctx.plane.credentials)
        receipts.store(self.session, self.ctx.settings, body)
        self.session.execute(delete(SubjectErasure).where(
            SubjectErasure.tenant_id == self.ctx.tenant_id,
            SubjectErasure.user_id == self.user_id))
        # The raw id leaves the control plane: every row that named the subject or one of
        # its conversations keeps a keyed hash of it instead (erasure_leftovers.py).
        hashed = pseudonyms.pseudonym(self.ctx.plane.credentials, self.ctx.tenant_id,
                                      self.user_id)
        # Their messages and summaries went with the pointers; their keys go too.
        owned = conversations.forget_subject(self.session, self.ctx.tenant_id, self.user_id)
        leftovers.scrub_jobs(self.session, self.ctx.tenant_id, self.user_id, owned, hashed,
                             self.ctx.job_id)
        self.session.execute(update(Job).where(Job.id == self.ctx.job_id)
                             .values(subject=hashed))
        revoked = leftovers.retire_agent_keys(self.ctx, self.user_id, owned, hashed)
        leftovers.hash_lifted_holds(self.session, self.ctx.tenant_id, owned, hashed)
        leftovers.forget_gc_prefixes(self.session, targets, self.user_id, owned)
        self.session.execute(update(SubjectKey).where(
            SubjectKey.tenant_id == self.ctx.tenant_id, SubjectKey.scope_type == "user",
            SubjectKey.scope_ref == self.user_id, SubjectKey.destroyed_at.is_not(None))
            .values(scope_ref=hashed))
        idempotency.forget_subject(self.session, self.ctx.tenant_id, self.user_id)
        idempotency.purge_expired(self.session)
        keys_repo.retire_scopes(self.session, self.ctx.tenant_id, "conversation", owned,
                                hashed, utcnow())
        result: dict[str, Any] = {"receipt_id": str(receipt_id), "work_done": work_done,
                                  "counts": {**counts, "keys": self.p["keys"]["destroyed"]}}
        if not work_done:
            result["note"] = ("nothing of this subject was found; nothing was deleted (the "
                              "subject was already erased or never stored)")
        self.ctx.save(result=result)
        self.session.commit()
        leftovers.forget_revoked(revoked)
        scrub_freed(self.session)
        return result


def _events_prefix(user_id: str) -> str:
    """The subject's own event directory (events in scope ``user``) under a target."""
    return f"events/user/{quote(user_id, safe='')}/"


def _paths_by_config(pairs: Any) -> dict[uuid.UUID, list[str]]:
    found: dict[uuid.UUID, list[str]] = defaultdict(list)
    for config_id, path in pairs:
        found[config_id].append(path)
    return found


def _audit_row(session: Session, ctx: JobContext, *, detail: str) -> AccessLog:
    """An audit row whose id is needed: the receipt names the sequence range it covers."""
    row = AccessLog(tenant_id=ctx.tenant_id, accessor_type=ctx.actor.accessor_type,
                    accessor_id=ctx.actor.accessor_id, operation="erase", success=True,
                    detail=detail, request_id=request_id_var.get(), accessed_at=utcnow())
    session.add(row)
    session.flush()
    return row


def _shredder() -> Any:
    """``control_plane.keys.subject_keys.shred_subject`` if per-subject keys exist here."""
    try:
        from ..keys import subject_keys as keys_service  # type: ignore[attr-defined,unused-ignore]
    except ModuleNotFoundError as exc:
        if exc.name in ("control_plane.keys", "control_plane.keys.subject_keys"):
            return None
        raise
    return getattr(keys_service, "shred_subject", None)


def _plan(ctx: JobContext) -> dict[str, Any]:
    """Dry run: count what an erasure would delete; delete and block nothing."""
    session, user_id = ctx.session, ctx.subject or ""
    pointers = subjects.count_pointers(session, ctx.tenant_id, user_id)
    by_scope: dict[str, int] = defaultdict(int)
    after: uuid.UUID | None = None
    objects = 0
    while True:
        page = list(subjects.pointer_page(session, ctx.tenant_id, user_id, after, BATCH))
        if not page:
            break
        for pointer in page:
            by_scope[pointer.scope_type] += 1
            objects += 1 + (1 if pointer.embedding_storage_path else 0)
        after = page[-1].id
    targets = subjects.targets(session, ctx.plane, ctx.tenant_id)
    session.commit()
    under_prefix = versions = 0
    with storage_errors():
        for target in targets:
            for entry in target.adapter.list_versions(target.path(
                    subjects.user_prefix(user_id))):
                under_prefix += 1
                versions += 0 if entry.is_latest and not entry.is_delete_marker else 1
    keys = ("the subject key would be destroyed if one exists" if _shredder() is not None
            else "no per-subject keys in this deployment")
    events = events_repo.count_subject(session, ctx.tenant_id, user_id)
    compactor_entries = int(session.scalar(select(func.count()).select_from(
        derived.compactions_of(ctx.tenant_id, user_id).subquery())) or 0)
    session.commit()
    plan = {"dry_run": True, "pointers": pointers, "pointers_by_scope": dict(by_scope),
            "events": events, "compactor_entries": compactor_entries,
            "objects": objects, "objects_under_subject_prefix": under_prefix,
            "noncurrent_versions_under_subject_prefix": versions, "keys": keys,
            "note": "dry run: nothing was deleted and writes were not blocked"}
    begin_write(session)
    audit.record(session, ctx.actor, "erase",
                 detail=f"job {ctx.job_id}: dry run; would delete {pointers} pointers and "
                        f"{objects} objects")
    session.execute(update(Job).where(Job.id == ctx.job_id).values(subject=None))
    session.commit()
    return plan
