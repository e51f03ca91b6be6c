"""The compactor (DESIGN §8): old raw events become curated entries per (scope, scope ref).

For each bucket — a (scope, scope ref) with at least ``min_events`` uncompressed events that
occurred more than ``older_than_days`` ago (per tenant, ``PUT /v1/compactor/config``) —
a run reads the events in (occurred_at, id) order, reads their bodies hash-verified from the
bucket, has the tenant's summariser summarise each data subject's apart (``erase.py``), and
writes each summary as an entry (``source=compactor``, ``importance=4``). Its commit sets
``compressed_at`` on exactly those events and records the provenance (summariser, and the
id and SHA-256 of every event summarised), so the three land together or not at all:

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

A bucket whose summariser fails (``SummarizerFailed``) is skipped and counted; it is retried
on the next run. A spent token budget (``BudgetSpent``) ends the run cleanly. Results and
progress hold counts only (I7).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ..audit import service as audit
from ..audit.service import Actor, audited
from ..compliance.guard import ensure_writable
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import Compaction, CompactorSettings, Job, MemoryEvent, MemoryPointer, Tenant
from ..errors import Conflict, DomainError, HashMismatch, NotFound, SubjectErasureInProgress
from ..jobs.service import JobContext, enqueue, enqueue_once
from ..plane.data_plane import DataPlane
from ..settings import Settings
from ..tenants.access import EVERYTHING, Access, ensure_visible
from . import repository as repo
from .erase import by_subject
from .repository import Bucket
from .schedule import parse_schedule, run_key
from .schemas import (
    DEFAULT_MIN_EVENTS,
    DEFAULT_OLDER_THAN_DAYS,
    CompactorConfigIn,
    CompactorConfigOut,
    CompactRunIn,
    ProvenanceEvent,
    ProvenanceOut,
)

if TYPE_CHECKING:
    from ..entries.schemas import EntryIn
    from ..summarizers import Summarizer, Summary

log = logging.getLogger(__name__)

KIND = "compact"
WRITERS = 3
PUTTERS = 4  # a group's objects are put side by side by a pool this size
# Entries per write transaction: one commit, one flush of the WAL, one INSERT per table for
# all of them. Past ~16 the per-entry saving is small and a refused group redoes more.
GROUP_ENTRIES = 16
IMPORTANCE = 4
TAGS = ["compacted"]


class AlreadyCompacted(Conflict):
    """Some of the events were compacted by another run between the read and the commit."""


class _EmptySummary(Exception):
    """The summariser answered nothing to keep: an entry needs a summary."""


@dataclass(frozen=True)
class Thresholds:
    min_events: int = DEFAULT_MIN_EVENTS
    older_than_days: int = DEFAULT_OLDER_THAN_DAYS
    enabled: bool = True


@dataclass
class Counts:
    """A run's result: counts only, never content."""

    buckets: int = 0
    compacted_buckets: int = 0
    events_compressed: int = 0
    entries_written: int = 0
    failed_buckets: int = 0
    skipped_buckets: int = 0  # another run got there first, or too few events left
    budget_spent: bool = False
    dry_run: bool = False
    failures: dict[str, int] = field(default_factory=dict)  # problem code -> buckets

    @classmethod
    def of(cls, saved: dict[str, Any]) -> Counts:
        known = {k: v for k, v in saved.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def plus(self, delta: Counts) -> Counts:
        """These counts with ``delta``'s added (``buckets`` and ``dry_run`` kept)."""
        failures = dict(self.failures)
        for code, n in delta.failures.items():
            failures[code] = failures.get(code, 0) + n
        return replace(
            self, compacted_buckets=self.compacted_buckets + delta.compacted_buckets,
            events_compressed=self.events_compressed + delta.events_compressed,
            entries_written=self.entries_written + delta.entries_written,
            failed_buckets=self.failed_buckets + delta.failed_buckets,
            skipped_buckets=self.skipped_buckets + delta.skipped_buckets,
            budget_spent=self.budget_spent or delta.budget_spent, failures=failures)


# --- configuration -------------------------------------------------------------------------

def thresholds(session: Session, tenant_id: uuid.UUID) -> Thresholds:
    row = repo.get_settings(session, tenant_id)
    if row is None:
        return Thresholds()
    return Thresholds(row.min_events, row.older_than_days, row.enabled)


def _config_out(settings: Settings, limits: Thresholds,
                updated_at: datetime | None) -> CompactorConfigOut:
    schedule = parse_schedule(settings.compactor_schedule)
    next_run = schedule.next_after(utcnow()) if limits.enabled else None
    return CompactorConfigOut(min_events=limits.min_events,
                              older_than_days=limits.older_than_days, enabled=limits.enabled,
                              schedule=settings.compactor_schedule, next_run_at=next_run,
                              updated_at=updated_at)


def get_config(session: Session, settings: Settings, actor: Actor) -> CompactorConfigOut:
    """The tenant's thresholds (the defaults while none were set) and the server schedule."""
    with audited(session, actor, "compactor_config_read"):
        row = repo.get_settings(session, actor.tenant_id)
        limits = thresholds(session, actor.tenant_id)
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "compactor_config_read")
        session.commit()
        return _config_out(settings, limits, row.updated_at if row else None)


def set_config(session: Session, settings: Settings, actor: Actor,
               body: CompactorConfigIn) -> CompactorConfigOut:
    """Replace the tenant's thresholds; the next run (scheduled or by hand) uses them."""
    with audited(session, actor, "compactor_config_write"):
        session.rollback()
        begin_write(session)
        now = utcnow()
        row = repo.get_settings(session, actor.tenant_id)
        if row is None:
            row = CompactorSettings(tenant_id=actor.tenant_id)
            session.add(row)
        row.min_events, row.older_than_days = body.min_events, body.older_than_days
        row.enabled, row.updated_at = body.enabled, now
        audit.record(session, actor, "compactor_config_write",
                     detail=f"min_events={body.min_events} older_than_days="
                            f"{body.older_than_days} enabled={body.enabled}")
        session.commit()
        return _config_out(settings, Thresholds(body.min_events, body.older_than_days,
                                                body.enabled), now)


# --- starting runs ---------------------------------------------------------------------------

def start_run(session: Session, actor: Actor, body: CompactRunIn, *,
              access: Access = EVERYTHING) -> Job:
    """Queue a compaction of the caller's tenant now (``POST /v1/compactor/run``). Not bound
    by the daily key: a run by hand beside a scheduled one is safe, as each bucket commits
    only if none of its events was compacted meanwhile."""
    with audited(session, actor, "compact_run", detail="compaction requested"):
        scope = body.scope.canonical if body.scope else None
        if scope is not None:
            ensure_visible(session, actor, access, scope, body.scope_ref or "-",
                           operation="compact_run", what=f"{scope} events",
                           missing="no events in that scope")
        session.rollback()
        begin_write(session)
        # A user scope's ref is a data subject: the job names it as its subject, so the
        # subject's erasure finds this row and replaces the id with its salted hash.
        job = enqueue(session, actor.tenant_id, KIND,
                      subject=body.scope_ref if scope == "user" else None,
                      params={"dry_run": body.dry_run, "scope": scope,
                              "scope_ref": body.scope_ref})
        audit.record(session, actor, "compact_run",
                     detail=f"{'dry run' if body.dry_run else 'compaction'} job {job.id} "
                            f"queued{' for one scope' if scope else ''}")
        session.commit()
        return job


def queue_daily_runs(sessions: sessionmaker[Session], day: date, owner: str) -> int:
    """Queue the scheduled run of ``day`` for every active tenant (tenants with uncompressed
    events whose compactor is on); how many this call queued. Tenants already holding that
    day's job are passed over by the unique key, so racing schedulers queue each once."""
    queued = 0
    key = run_key(day)
    with sessions() as session:
        tenants = repo.active_tenants(session)
        session.rollback()
        for tenant_id in tenants:
            begin_write(session)
            job_id = enqueue_once(session, tenant_id, KIND, key,
                                  params={"dry_run": False, "scheduled_for": day.isoformat()})
            if job_id is None:
                session.rollback()
                continue
            audit.record(session, Actor(tenant_id, "system", f"scheduler:{owner}"),
                         "compact_run", detail=f"scheduled compaction job {job_id} queued "
                                               f"for {day.isoformat()}")
            session.commit()
            queued += 1
    return queued


# --- the run -------------------------------------------------------------------------------

def run_job(ctx: JobContext) -> dict[str, Any]:
    """The ``compact`` job handler."""
    counts = compact_tenant(
        ctx.session, ctx.plane, ctx.settings, ctx.tenant_id, actor=ctx.actor,
        dry_run=bool(ctx.params.get("dry_run")), scope=ctx.params.get("scope"),
        scope_ref=ctx.params.get("scope_ref"), job=ctx)
    return counts.as_dict()


def compact_tenant(session: Session, plane: DataPlane, settings: Settings,
                   tenant_id: uuid.UUID, *, actor: Actor, dry_run: bool = False,
                   scope: str | None = None, scope_ref: str | None = None,
                   job: JobContext | None = None, summarizer: Summarizer | None = None,
                   writers: int = WRITERS, group: int | None = None,
                   now: Callable[[], datetime] = utcnow) -> Counts:
    """Compact every due bucket of the tenant (or of one scope); see the module docstring.
    With ``job``, counts are saved in its progress with each bucket's commit, and a job
    taken over resumes with them (and with the first attempt's cutoff). ``summarizer``:
    default, the tenant's (``summarizers.summarizer_for``). ``writers``: threads writing
    groups of entries side by side. ``group``: entries per write transaction (default
    ``GROUP_ENTRIES``; 1 writes each entry in a transaction of its own)."""
    return _Run(session, plane, settings, tenant_id, actor, dry_run=dry_run, job=job,
                now=now, writers=writers, group=group).run(scope, scope_ref, summarizer)


class _Run:
    def __init__(self, session: Session, plane: DataPlane, settings: Settings,
                 tenant_id: uuid.UUID, actor: Actor, *, dry_run: bool,
                 job: JobContext | None, now: Callable[[], datetime],
                 writers: int = 1, group: int | None = None) -> None:
        self.session, self.plane, self.settings = session, plane, settings
        self.writers = max(1, writers)
        self.group_size = max(1, group if group is not None else GROUP_ENTRIES)
        self.put_pool: ThreadPoolExecutor | None = None
        self._counts_lock = threading.Lock()
        # SQLite has one writer: the writer threads take turns on this lock for their write
        # transactions (their puts still overlap) instead of on SQLite's busy timeout, whose
        # waits sleep in steps of up to 100 ms and left the entries queueing.
        self.write_lock: contextlib.AbstractContextManager[object] = (
            threading.Lock()
            if session is not None and session.get_bind().dialect.name == "sqlite"
            else contextlib.nullcontext())
        self.tenant_id, self.actor, self.job = tenant_id, actor, job
        self.now = now
        progress = dict(job.progress) if job is not None else {}
        self.counts = Counts.of(progress.get("counts", {}))
        self.counts.dry_run = dry_run
        self.cutoff_text: str | None = progress.get("cutoff")
        self.limits = Thresholds()
        # Buckets failed or skipped midway: their remaining chunks are passed over.
        self.done: set[tuple[str, str]] = set()

    def run(self, scope: str | None, scope_ref: str | None,
            summarizer: Summarizer | None = None) -> Counts:
        session = self.session
        self.limits = thresholds(session, self.tenant_id)
        if self.cutoff_text is None:
            cutoff = self.now() - timedelta(days=self.limits.older_than_days)
        else:
            cutoff = datetime.fromisoformat(self.cutoff_text)
        buckets = repo.due_buckets(session, self.tenant_id, cutoff=cutoff,
                                   min_events=self.limits.min_events, scope=scope,
                                   scope_ref=scope_ref)
        session.rollback()
        if self.job is not None and self.cutoff_text is None:
            self.counts.buckets = len(buckets)
            self.cutoff_text = cutoff.isoformat()
            self.job.commit_progress(cutoff=self.cutoff_text, counts=self.counts.as_dict())
        elif self.job is None:
            self.counts.buckets = len(buckets)
        if not buckets:
            return self.counts
        if self.counts.dry_run:
            for bucket in buckets:
                self.counts.compacted_buckets += 1
                self.counts.events_compressed += bucket.events
                self.counts.entries_written += len(self.chunk_sizes(bucket.events))
            return self.counts
        summarizer = summarizer or self._summarizer()
        from ..summarizers import BudgetSpent, SummarizerFailed

        # Three stages overlap: a reader thread reads the next chunk's bodies, this thread
        # summarises, writer threads put and commit the groups of entries before. Each
        # entry commits with its events' marks, in its group's one transaction.
        reader = _Reader(self, buckets, cutoff)
        writer = _Writer(self, self.writers)
        self.put_pool = ThreadPoolExecutor(max_workers=PUTTERS,
                                           thread_name_prefix="compact-put")
        group: list[_Write] = []
        try:
            for item in reader:
                key = (item.bucket.scope, item.bucket.scope_ref)
                if key in self.done:
                    continue
                if item.first and self.job is not None:
                    self.job.check()
                if item.error is not None:
                    self.done.add(key)
                    writer.submit(_Outcome(key, failed=item.error.code))
                    continue
                if item.events is None:
                    writer.submit(_Outcome(key, skipped=True))
                    continue
                assert item.bodies is not None
                try:
                    summary = self._summarise(item, summarizer)
                except BudgetSpent:
                    writer.submit(_Outcome(key, budget_spent=True))
                    break
                except SummarizerFailed as exc:
                    self.done.add(key)
                    writer.submit(_Outcome(key, failed=exc.code))
                    continue
                except _EmptySummary:
                    self.done.add(key)
                    writer.submit(_Outcome(key, failed="empty_summary"))
                    continue
                self.plane.checkpoint("compact:summarised")
                # Only what the write needs of each event goes on: the loaded rows (and
                # their ORM state) are let go as soon as the chunk is summarised.
                covered = [_Event(e.id, e.occurred_at, e.content_sha256, e.subject_user_id)
                           for e in item.events]
                group.append(_Write(item.bucket, covered, summary, item.first))
                if len(group) >= self.group_size:
                    writer.submit(_Group(group))
                    group = []
            if group:
                writer.submit(_Group(group))
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        finally:
            reader.close()
            self.put_pool.shutdown()
        return self.counts

    def _summarizer(self) -> Summarizer:
        from ..summarizers import TokenBudget, summarizer_for

        found = summarizer_for(self.session, self.settings, self.tenant_id, TokenBudget())
        self.session.rollback()
        return found

    def chunk_sizes(self, total: int) -> list[int]:
        """Split ``total`` events into as few entries as the per-entry cap allows, of about
        equal size (each at least half the cap, so never under ``min_events``)."""
        cap = self.settings.compactor_max_events_per_entry
        parts = max(1, -(-total // cap))
        return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]

    def _summarise(self, item: _Item, summarizer: Summarizer) -> Summary:
        from ..summarizers import EventText

        assert item.events is not None and item.bodies is not None
        texts = [EventText(e.id, e.kind, e.occurred_at, item.bodies[e.id]) for e in item.events]
        item.bodies = None  # the bodies leave memory as soon as they are summarised
        summary = summarizer.summarize(item.bucket.scope, item.bucket.scope_ref, texts)
        if not summary.text.strip():
            raise _EmptySummary()
        return summary

    def write_group(self, session: Session, group: _Group) -> None:
        """The writer thread: a group's entries, their events' marks and provenance, in one
        transaction (``entries.create_entries``). If one of its buckets was compacted by
        another run meanwhile, or its subject's erasure began, the group commits nothing and
        its entries are written one by one, each landing or being passed over on its own."""
        from ..entries import service as entries

        tasks = [t for t in group.writes if (t.bucket.scope, t.bucket.scope_ref) not in self.done]
        if len(tasks) <= 1:
            for task in tasks:
                self.write(session, task)
            return
        items = [entries.NewEntry(new_id(), self._spec(task), (
            "compact", f"{len(task.events)} events summarised by {task.summary.provider} "
                       f"{task.summary.model} prompt {task.summary.prompt_version}"))
                 for task in tasks]
        delta = Counts()
        for task in tasks:
            delta = delta.plus(Counts(events_compressed=len(task.events), entries_written=1,
                                      compacted_buckets=1 if task.first else 0))

        def mark(session: Session, ids: Sequence[uuid.UUID]) -> None:
            self._mark_group(session, tasks, ids, delta)

        assert self.put_pool is not None
        try:
            entries.create_entries(session, self.plane, self.actor, items,
                                   source="compactor", extra=mark, write_lock=self.write_lock,
                                   put_map=self.put_pool.map)
        except (AlreadyCompacted, SubjectErasureInProgress):
            for task in tasks:
                self.write(session, task)
            return
        self._add(delta)
        self.plane.checkpoint("compact:committed")

    def _mark_group(self, session: Session, tasks: Sequence[_Write], ids: Sequence[uuid.UUID],
                    delta: Counts) -> None:
        """Inside the group's commit transaction: mark each entry's events, record the
        group's provenance, save progress."""
        subjects = {e.subject_user_id for task in tasks for e in task.events}
        ensure_writable(session, self.tenant_id, *subjects)
        now = utcnow()
        job_id = self.job.job_id if self.job is not None else None
        compactions: list[dict[str, object]] = []
        hashes: list[dict[str, object]] = []
        for task, pointer_id in zip(tasks, ids, strict=True):
            self.plane.checkpoint("compact:marking")
            marked = repo.mark_compressed(session, self.tenant_id, task.bucket, task.events,
                                          now)
            if marked != len(task.events):
                raise AlreadyCompacted(
                    f"{len(task.events) - marked} of the {len(task.events)} events were "
                    "compacted (or erased) by another run meanwhile")
            summary = task.summary
            compactions.append({
                "id": pointer_id, "tenant_id": self.tenant_id, "scope_type": task.bucket.scope,
                "scope_ref": task.bucket.scope_ref, "provider": summary.provider,
                "model": summary.model, "prompt_version": summary.prompt_version,
                "event_count": len(task.events), "job_id": job_id, "created_at": now})
            # read_bodies served each body only if its stored bytes hash to the event's
            # content_sha256: that is the hash of the body exactly as summarised.
            hashes.extend({"compaction_id": pointer_id, "event_id": e.id,
                           "event_sha256": e.content_sha256} for e in task.events)
        repo.add_provenances(session, compactions, hashes)
        self._save(session, delta)
        self.plane.checkpoint("compact:group_written")

    @staticmethod
    def _spec(task: _Write) -> EntryIn:
        from ..entries.schemas import EntryIn

        events = task.events
        subjects = {e.subject_user_id for e in events}
        since, until = events[0].occurred_at, events[-1].occurred_at
        return EntryIn(scope=task.bucket.scope, scope_ref=task.bucket.scope_ref,  # type: ignore[arg-type]
                       title=f"Compacted: {len(events)} events, {since:%Y-%m-%d} – "
                             f"{until:%Y-%m-%d}",
                       summary=task.summary.text, tags=list(TAGS), importance=IMPORTANCE,
                       user_id=next(iter(subjects)) if len(subjects) == 1 else None)

    def write(self, session: Session, task: _Write) -> None:
        """The writer thread: one entry, its events' marks and provenance, one commit."""
        from ..entries import service as entries

        bucket, events, summary = task.bucket, task.events, task.summary
        key = (bucket.scope, bucket.scope_ref)
        if key in self.done:
            return
        # read_bodies served each body only if its stored bytes hash to the event's
        # content_sha256: that is the hash of the body exactly as summarised.
        hashes = [(e.id, e.content_sha256) for e in events]
        subjects = {e.subject_user_id for e in events}
        spec = self._spec(task)
        delta = Counts(events_compressed=len(events), entries_written=1,
                       compacted_buckets=1 if task.first else 0)  # a bucket counts once

        def mark(session: Session, pointer: MemoryPointer) -> None:
            self._mark(session, pointer, bucket, events, hashes, summary, subjects, delta)

        try:
            entries.create_entry(session, self.plane, self.actor, spec, access=EVERYTHING,
                                 source_override="compactor", pointer_id=new_id(),
                                 extra=mark, write_lock=self.write_lock)
        except AlreadyCompacted:
            self.done.add(key)
            self.record(session, _Outcome(key, skipped=True))
            return
        except SubjectErasureInProgress as exc:
            self.done.add(key)
            self.record(session, _Outcome(key, failed=exc.code))
            return
        self._add(delta)
        self.plane.checkpoint("compact:committed")

    def _add(self, delta: Counts) -> None:
        with self._counts_lock:
            self.counts = self.counts.plus(delta)

    def _save(self, session: Session, delta: Counts) -> None:
        """Add ``delta`` to the counts in the job's progress (the row locked), in the
        session's open write transaction."""
        if self.job is None:
            return

        def change(progress: dict[str, Any]) -> dict[str, Any]:
            stored = Counts.of(progress.get("counts", {}))
            return {**progress, "counts": stored.plus(delta).as_dict()}

        self.job.update_in(session, change)

    def record(self, session: Session, outcome: _Outcome) -> None:
        """A writer thread: count a bucket skipped or failed (or the budget spent), in the
        job's progress too."""
        delta = Counts(skipped_buckets=1 if outcome.skipped else 0,
                       failed_buckets=1 if outcome.failed is not None else 0,
                       budget_spent=outcome.budget_spent,
                       failures={outcome.failed: 1} if outcome.failed is not None else {})
        if outcome.failed is not None:
            log.warning("compaction of a bucket of tenant %s failed (%s); retried next run",
                        self.tenant_id, outcome.failed)
        if self.job is not None:
            if session.in_transaction():
                session.rollback()
            with self.write_lock:
                try:
                    begin_write(session)
                    self._save(session, delta)
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        self._add(delta)

    def _mark(self, session: Session, pointer: MemoryPointer, bucket: Bucket,
              events: Sequence[_Event], hashes: list[tuple[uuid.UUID, str]],
              summary: Summary, subjects: set[str | None], delta: Counts) -> None:
        """Inside the entry's commit transaction: mark, record provenance, save progress."""
        self.plane.checkpoint("compact:marking")
        ensure_writable(session, self.tenant_id, *subjects)
        ids = [e.id for e in events]
        marked = repo.mark_compressed(session, self.tenant_id, bucket, events, utcnow())
        if marked != len(ids):
            raise AlreadyCompacted(
                f"{len(ids) - marked} of the {len(ids)} events were compacted (or erased) by "
                "another run meanwhile; this run's summary of them is dropped")
        repo.add_provenance(session, Compaction(
            id=pointer.id, tenant_id=self.tenant_id, scope_type=bucket.scope,
            scope_ref=bucket.scope_ref, provider=summary.provider, model=summary.model,
            prompt_version=summary.prompt_version, event_count=len(ids),
            job_id=self.job.job_id if self.job is not None else None,
            created_at=utcnow()), hashes)
        audit.record(session, self.actor, "compact", pointer_id=pointer.id,
                     detail=f"{len(ids)} events summarised by {summary.provider} "
                            f"{summary.model} prompt {summary.prompt_version}")
        self._save(session, delta)


@dataclass(frozen=True, slots=True)
class _Event:
    """What writing an entry needs of an event it covers."""

    id: uuid.UUID
    occurred_at: datetime
    content_sha256: str
    subject_user_id: str | None


@dataclass(frozen=True)
class _Write:
    bucket: Bucket
    events: list[_Event]
    summary: Summary
    first: bool


@dataclass(frozen=True)
class _Group:
    """Entries written in one transaction: chunks summarised one after the other."""

    writes: list[_Write]


@dataclass(frozen=True)
class _Outcome:
    key: tuple[str, str]
    skipped: bool = False
    failed: str | None = None
    budget_spent: bool = False


class _Writer:
    """Writes the entries (and counts the outcomes) on ``threads`` threads, each with a
    session of its own; the queue holds as many tasks as there are threads, so summarising
    never runs far ahead of the writes. An error there (storage down, a crash test's stop, a
    lost lease) stops the writers and is raised in the run at its next ``submit`` or at
    ``finish``."""

    def __init__(self, run: _Run, threads: int) -> None:
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
        run = self.run
        session = Session(run.session.get_bind(), expire_on_commit=False, autoflush=False)
        try:
            while not self.stop.is_set() and self.error is None:
                try:
                    task = self.queue.get(timeout=0.05)
                except queue.Empty:
                    continue
                if task is _DONE:
                    return
                if isinstance(task, _Group):
                    run.write_group(session, task)
                elif isinstance(task, _Outcome):
                    run.record(session, task)
        except BaseException as exc:
            self.error = exc
            self.stop.set()
        finally:
            session.close()


@dataclass
class _Item:
    """One chunk of a bucket, read: its events and their verified bodies; ``events`` None
    when too few events were left; ``error`` when a body failed verification."""

    bucket: Bucket
    first: bool
    events: list[MemoryEvent] | None = None
    bodies: dict[uuid.UUID, str] | None = None
    error: DomainError | None = None


_DONE = object()


class _Reader:
    """Reads the next chunk (its events, then its bodies through ``events.read_bodies``) on a
    thread and session of its own while the run summarises and writes the current one, so
    the bucket's I/O overlaps the summariser's work. The queue holds one chunk: at most three
    chunks' bodies are in memory at once, whatever the number of buckets.

    The rows it hands over are detached from its session, so the run reads their loaded
    attributes without touching that session from another thread."""

    def __init__(self, run: _Run, buckets: Sequence[Bucket], cutoff: datetime) -> None:
        self.run, self.buckets, self.cutoff = run, buckets, cutoff
        self.queue: queue.Queue[object] = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True,
                                       name=f"{threading.current_thread().name}:compact-reader")
        self.thread.start()

    def __iter__(self) -> Iterator[_Item]:
        while True:
            item = self.queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, _Item)
            yield item

    def close(self) -> None:
        self.stop.set()
        while self.thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self.queue.get(timeout=0.05)
        self.thread.join()

    def _put(self, item: object) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        from ..events import service as events_service

        run = self.run
        session = Session(run.session.get_bind(), expire_on_commit=False, autoflush=False)
        try:
            for bucket in self.buckets:
                if self.stop.is_set():
                    return
                events = repo.bucket_events(session, run.tenant_id, bucket,
                                            cutoff=self.cutoff, limit=bucket.events)
                session.commit()
                # Detach the rows (the session holds nothing else between buckets): one
                # expunge_all, not an expunge per row, whose cascade walk costs more than the
                # row's load.
                session.expunge_all()
                if len(events) < run.limits.min_events:
                    if not self._put(_Item(bucket, True)):
                        return
                    continue
                for n, chunk in enumerate(by_subject(events, run.chunk_sizes)):
                    item = _Item(bucket, n == 0, chunk)
                    try:
                        item.bodies = events_service.read_bodies(
                            session, run.plane, run.tenant_id, chunk, actor=run.actor)
                    except HashMismatch as exc:
                        item.error = exc
                    if session.in_transaction():
                        session.commit()
                    if not self._put(item):
                        return
                    if item.error is not None:
                        break
            self._put(_DONE)
        except BaseException as exc:  # the run raises it (storage down, database gone …)
            session.rollback()
            self._put(exc)
        finally:
            session.close()


# --- provenance ----------------------------------------------------------------------------

def provenance(session: Session, actor: Actor, entry_id: uuid.UUID, *,
               access: Access = EVERYTHING) -> ProvenanceOut:
    """Which summariser wrote a compactor entry, and the id and SHA-256 of each event it
    summarised; 404 for any other entry (or one outside the key's scopes)."""
    with audited(session, actor, "compact_provenance", pointer_id=entry_id):
        found = repo.compaction_of(session, actor.tenant_id, entry_id)
        missing = f"no compactor entry {entry_id}"
        if found is None:
            raise NotFound(missing)
        compaction, covered = found
        ensure_visible(session, actor, access, compaction.scope_type, compaction.scope_ref,
                       operation="compact_provenance", what="compactor entry", missing=missing)
        order = {event_id: n for n, event_id in enumerate(session.scalars(
            select(MemoryEvent.id).where(
                MemoryEvent.tenant_id == actor.tenant_id,
                MemoryEvent.id.in_([c.event_id for c in covered]))
            .order_by(MemoryEvent.occurred_at, MemoryEvent.id)))}
        covered.sort(key=lambda c: (order.get(c.event_id, len(order)), str(c.event_id)))
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "compact_provenance", pointer_id=entry_id,
                     detail=f"{len(covered)} events")
        session.commit()
        return ProvenanceOut(
            entry_id=compaction.id, scope=compaction.scope_type,
            scope_ref=compaction.scope_ref, provider=compaction.provider,
            model=compaction.model, prompt_version=compaction.prompt_version,
            event_count=compaction.event_count, job_id=compaction.job_id,
            created_at=compaction.created_at,
            events=[ProvenanceEvent(event_id=c.event_id, event_sha256=c.event_sha256)
                    for c in covered])


def tenant_ids(session: Session, tenant: uuid.UUID | None) -> list[uuid.UUID]:
    """The CLI's tenants: the one named (if it exists), else every active tenant."""
    if tenant is not None:
        found = session.scalar(select(Tenant.id).where(Tenant.id == tenant))
        return [found] if found is not None else []
    return repo.active_tenants(session)
