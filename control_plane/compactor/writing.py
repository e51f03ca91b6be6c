"""Writing the compactor's entries: each summary becomes an entry (``source=compactor``,
``importance=4``) whose commit sets ``compressed_at`` on exactly the events it summarised and
records the provenance (summariser, and the id and SHA-256 of every event summarised), so
the three land together or not at all:

  1. read the events and their bodies; summarise (nothing written yet);
  2. put the summary object (no transaction open);
  3. one transaction: the entry's pointer, ``compressed_at`` on the events
     ``WHERE compressed_at IS NULL`` — fewer rows than summarised means another run got
     there first, and nothing commits —, the provenance rows, the audit row, the job's
     progress; commit.

Entries are written in groups (up to ``GROUP_ENTRIES`` chunks summarised one after the
other, ``entries.create_entries``): the group's objects are put side by side, then
step 3 runs once for all of them — one commit, one multi-row INSERT per table, one marking
statement per entry —, so the group lands whole or not at all. If another run compacted one
of its buckets meanwhile, or a subject's erasure began, the group commits nothing and its
entries are written one by one (``entries.create_entry``), each landing or being passed over
on its own. Buckets whose summariser failed are never in a group.

A crash before 3 commits leaves at most objects no pointer names (orphan GC removes them)
and the events uncompressed: the next run summarises them again, once. A crash after it
leaves nothing to redo: the events are no longer selected. Events are never deleted.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import Compaction, MemoryPointer
from ..errors import Conflict, SubjectErasureInProgress
from ..holds.guard import ensure_writable
from ..identity import EVERYTHING, Actor
from ..jobs.service import JobContext
from ..plane.data_plane import DataPlane
from . import repository as repo
from .counts import Counts
from .repository import Bucket

if TYPE_CHECKING:
    from ..entries.schemas import EntryIn
    from ..summarizers import Summary

log = logging.getLogger(__name__)

PUTTERS = 4  # a group's objects are put side by side by a pool this size
# Entries per write transaction: one commit, one flush of the WAL, one INSERT per table for
# all of them. Past ~16 the per-entry saving is small and a refused group redoes more.
GROUP_ENTRIES = 16
IMPORTANCE = 4
TAGS = ["compacted"]


class AlreadyCompacted(Conflict):
    """Some of the events were compacted by another run between the read and the commit."""


@dataclass(frozen=True, slots=True)
class Event:
    """What writing an entry needs of an event it covers."""

    id: uuid.UUID
    occurred_at: datetime
    content_sha256: str
    subject_user_id: str | None


@dataclass(frozen=True)
class Write:
    bucket: Bucket
    events: list[Event]
    summary: Summary
    first: bool


@dataclass(frozen=True)
class Group:
    """Entries written in one transaction: chunks summarised one after the other."""

    writes: list[Write]


@dataclass(frozen=True)
class Outcome:
    key: tuple[str, str]
    skipped: bool = False
    failed: str | None = None
    budget_spent: bool = False


class RunState(Protocol):
    """What the writers need of the run they write for."""

    session: Session
    plane: DataPlane
    tenant_id: uuid.UUID
    actor: Actor
    job: JobContext | None
    # Buckets failed or skipped midway: their remaining chunks are passed over.
    done: set[tuple[str, str]]
    write_lock: contextlib.AbstractContextManager[object]
    put_pool: ThreadPoolExecutor | None

    def add(self, delta: Counts) -> None: ...

    def save(self, session: Session, delta: Counts) -> None: ...


_DONE = object()


class Writer:
    """Writes the entries (and counts the outcomes) on ``threads`` threads, each with a
    session of its own; the queue holds as many tasks as there are threads, so summarising
    never runs far ahead of the writes. An error there (storage down, a crash test's stop, a
    lost lease) stops the writers and is raised in the run at its next ``submit`` or at
    ``finish``."""

    def __init__(self, run: RunState, threads: int) -> None:
        self.run = run
        self.queue: queue.Queue[object] = queue.Queue(maxsize=threads)
        self.error: BaseException | None = None
        self.stop = threading.Event()
        name = threading.current_thread().name
        self.threads = [threading.Thread(target=self._loop, daemon=True,
                                         name=f"{name}:compact-writer-{n}")
                        for n in range(threads)]
        for thread in self.threads:
            thread.start()

    def submit(self, task: object) -> None:
        while True:
            if self.error is not None:
                raise self.error
            if not any(thread.is_alive() for thread in self.threads):
                raise RuntimeError("the compactor's writers stopped")
            try:
                self.queue.put(task, timeout=0.05)
                return
            except queue.Full:
                continue

    def finish(self) -> None:
        for _ in self.threads:
            self.submit(_DONE)
        for thread in self.threads:
            thread.join()
        if self.error is not None:
            raise self.error

    def abort(self) -> None:
        self.stop.set()
        while any(thread.is_alive() for thread in self.threads):
            with contextlib.suppress(queue.Empty):
                self.queue.get(timeout=0.05)
        for thread in self.threads:
            thread.join()

    def _loop(self) -> None:
        session = Session(self.run.session.get_bind(), expire_on_commit=False, autoflush=False)
        try:
            while not self.stop.is_set() and self.error is None:
                try:
                    task = self.queue.get(timeout=0.05)
                except queue.Empty:
                    continue
                if task is _DONE:
                    return
                if isinstance(task, Group):
                    self.write_group(session, task)
                elif isinstance(task, Outcome):
                    self.record(session, task)
        except BaseException as exc:
            self.error = exc
            self.stop.set()
        finally:
            session.close()

    def record(self, session: Session, outcome: Outcome) -> None:
        """A writer thread: count a bucket skipped or failed (or the budget spent), in the
        job's progress too."""
        run = self.run
        delta = Counts(skipped_buckets=1 if outcome.skipped else 0,
                       failed_buckets=1 if outcome.failed is not None else 0,
                       budget_spent=outcome.budget_spent,
                       failures={outcome.failed: 1} if outcome.failed is not None else {})
        if outcome.failed is not None:
            log.warning("compaction of a bucket of tenant %s failed (%s); retried next run",
                        run.tenant_id, outcome.failed)
        if run.job is not None:
            if session.in_transaction():
                session.rollback()
            with run.write_lock:
                try:
                    begin_write(session)
                    run.save(session, delta)
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        run.add(delta)

    def write_group(self, session: Session, group: Group) -> None:
        """The writer thread: a group's entries, their events' marks and provenance, in one
        transaction (``entries.create_entries``). If one of its buckets was compacted by
        another run meanwhile, or its subject's erasure began, the group commits nothing and
        its entries are written one by one, each landing or being passed over on its own."""
        from ..entries import group as entries

        run = self.run
        tasks = [t for t in group.writes if (t.bucket.scope, t.bucket.scope_ref) not in run.done]
        if len(tasks) <= 1:
            for task in tasks:
                self.write(session, task)
            return
        items = [entries.NewEntry(new_id(), _spec(task), (
            "compact", f"{len(task.events)} events summarised by {task.summary.provider} "
                       f"{task.summary.model} prompt {task.summary.prompt_version}"))
                 for task in tasks]
        delta = Counts()
        for task in tasks:
            delta = delta.plus(Counts(events_compressed=len(task.events), entries_written=1,
                                      compacted_buckets=1 if task.first else 0))

        def mark(session: Session, ids: Sequence[uuid.UUID]) -> None:
            self._mark_group(session, tasks, ids, delta)

        assert run.put_pool is not None
        try:
            entries.create_entries(session, run.plane, run.actor, items,
                                   source="compactor", extra=mark, write_lock=run.write_lock,
                                   put_map=run.put_pool.map)
        except (AlreadyCompacted, SubjectErasureInProgress):
            for task in tasks:
                self.write(session, task)
            return
        run.add(delta)
        run.plane.checkpoint("compact:committed")

    def _mark_group(self, session: Session, tasks: Sequence[Write], ids: Sequence[uuid.UUID],
                    delta: Counts) -> None:
        """Inside the group's commit transaction: mark each entry's events, record the
        group's provenance, save progress."""
        run = self.run
        subjects = {e.subject_user_id for task in tasks for e in task.events}
        ensure_writable(session, run.tenant_id, *subjects)
        now = utcnow()
        job_id = run.job.job_id if run.job is not None else None
        compactions: list[dict[str, object]] = []
        hashes: list[dict[str, object]] = []
        for task, pointer_id in zip(tasks, ids, strict=True):
            run.plane.checkpoint("compact:marking")
            marked = repo.mark_compressed(session, run.tenant_id, task.bucket, task.events,
                                          now)
            if marked != len(task.events):
                raise AlreadyCompacted(
                    f"{len(task.events) - marked} of the {len(task.events)} events were "
                    "compacted (or erased) by another run meanwhile")
            summary = task.summary
            compactions.append({
                "id": pointer_id, "tenant_id": run.tenant_id, "scope_type": task.bucket.scope,
                "scope_ref": task.bucket.scope_ref, "provider": summary.provider,
                "model": summary.model, "prompt_version": summary.prompt_version,
                "event_count": len(task.events), "job_id": job_id, "created_at": now})
            # read_bodies served each body only if its stored bytes hash to the event's
            # content_sha256: that is the hash of the body exactly as summarised.
            hashes.extend({"compaction_id": pointer_id, "event_id": e.id,
                           "event_sha256": e.content_sha256} for e in task.events)
        repo.add_provenances(session, compactions, hashes)
        run.save(session, delta)
        run.plane.checkpoint("compact:group_written")

    def write(self, session: Session, task: Write) -> None:
        """The writer thread: one entry, its events' marks and provenance, one commit."""
        from ..entries import service as entries

        run = self.run
        bucket, events, summary = task.bucket, task.events, task.summary
        key = (bucket.scope, bucket.scope_ref)
        if key in run.done:
            return
        # read_bodies served each body only if its stored bytes hash to the event's
        # content_sha256: that is the hash of the body exactly as summarised.
        hashes = [(e.id, e.content_sha256) for e in events]
        subjects = {e.subject_user_id for e in events}
        spec = _spec(task)
        delta = Counts(events_compressed=len(events), entries_written=1,
                       compacted_buckets=1 if task.first else 0)  # a bucket counts once

        def mark(session: Session, pointer: MemoryPointer) -> None:
            self._mark(session, pointer, bucket, events, hashes, summary, subjects, delta)

        try:
            entries.create_entry(session, run.plane, run.actor, spec, access=EVERYTHING,
                                 source_override="compactor", pointer_id=new_id(),
                                 extra=mark, write_lock=run.write_lock)
        except AlreadyCompacted:
            run.done.add(key)
            self.record(session, Outcome(key, skipped=True))
            return
        except SubjectErasureInProgress as exc:
            run.done.add(key)
            self.record(session, Outcome(key, failed=exc.code))
            return
        run.add(delta)
        run.plane.checkpoint("compact:committed")

    def _mark(self, session: Session, pointer: MemoryPointer, bucket: Bucket,
              events: Sequence[Event], hashes: list[tuple[uuid.UUID, str]],
              summary: Summary, subjects: set[str | None], delta: Counts) -> None:
        """Inside the entry's commit transaction: mark, record provenance, save progress."""
        run = self.run
        run.plane.checkpoint("compact:marking")
        ensure_writable(session, run.tenant_id, *subjects)
        ids = [e.id for e in events]
        marked = repo.mark_compressed(session, run.tenant_id, bucket, events, utcnow())
        if marked != len(ids):
            raise AlreadyCompacted(
                f"{len(ids) - marked} of the {len(ids)} events were compacted (or erased) by "
                "another run meanwhile; this run's summary of them is dropped")
        repo.add_provenance(session, Compaction(
            id=pointer.id, tenant_id=run.tenant_id, scope_type=bucket.scope,
            scope_ref=bucket.scope_ref, provider=summary.provider, model=summary.model,
            prompt_version=summary.prompt_version, event_count=len(ids),
            job_id=run.job.job_id if run.job is not None else None,
            created_at=utcnow()), hashes)
        audit.record(session, run.actor, "compact", pointer_id=pointer.id,
                     detail=f"{len(ids)} events summarised by {summary.provider} "
                            f"{summary.model} prompt {summary.prompt_version}")
        run.save(session, delta)


def _spec(task: Write) -> EntryIn:
    from ..entries.schemas import EntryIn

    events = task.events
    subjects = {e.subject_user_id for e in events}
    since, until = events[0].occurred_at, events[-1].occurred_at
    return EntryIn(scope=task.bucket.scope, scope_ref=task.bucket.scope_ref,  # type: ignore[arg-type]
                   title=f"Compacted: {len(events)} events, {since:%Y-%m-%d} – "
                         f"{until:%Y-%m-%d}",
                   summary=task.summary.text, tags=list(TAGS), importance=IMPORTANCE,
                   user_id=next(iter(subjects)) if len(subjects) == 1 else None)
