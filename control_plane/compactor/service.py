"""The compactor (DESIGN §8): old raw events become one curated entry per (scope, scope ref).

For each bucket — a (scope, scope ref) with at least ``min_events`` uncompressed events that
occurred more than ``older_than_days`` ago (per tenant, ``PUT /v1/compactor/config``) —
a run reads the events in (occurred_at, id) order, reads their bodies hash-verified from the
bucket, has the tenant's summariser summarise them, and writes the summary as an entry
(``source=compactor``, ``importance=4``). The entry's commit transaction also sets
``compressed_at`` on exactly those events and records the provenance (summariser, and the
id and SHA-256 of every event summarised), so the three land together or not at all:

  1. read the events and their bodies; summarise (nothing written yet);
  2. put the summary object (``entries.create_entry``; no transaction open);
  3. one transaction: the entry's pointer, ``compressed_at`` on the events
     ``WHERE compressed_at IS NULL`` — fewer rows than summarised means another run got
     there first, and nothing commits —, the provenance rows, the audit row, the job's
     progress; commit.

A crash before 3 commits leaves at most an object no pointer names (orphan GC removes it)
and the events uncompressed: the next run summarises them again, once. A crash after it
leaves nothing to redo: the events are no longer selected. Events are never deleted.

A bucket whose summariser fails (``SummarizerFailed``) is skipped and counted; it is retried
on the next run. A spent token budget (``BudgetSpent``) ends the run cleanly. Results and
progress hold counts only (I7).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
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
from ..errors import Conflict, HashMismatch, NotFound, SubjectErasureInProgress
from ..jobs.service import JobContext, enqueue, enqueue_once
from ..settings import Settings
from ..storage_config.plane import DataPlane
from ..tenants.access import EVERYTHING, Access, ensure_visible
from . import repository as repo
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
    from ..summarizers import Summarizer, Summary

log = logging.getLogger(__name__)

KIND = "compact"
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
        job = enqueue(session, actor.tenant_id, KIND, subject=None,
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
                   now: Callable[[], datetime] = utcnow) -> Counts:
    """Compact every due bucket of the tenant (or of one scope); see the module docstring.
    With ``job``, counts are saved in its progress with each bucket's commit, and a job
    taken over resumes with them (and with the first attempt's cutoff). ``summarizer``:
    default, the tenant's (``summarizers.summarizer_for``)."""
    return _Run(session, plane, settings, tenant_id, actor, dry_run=dry_run, job=job,
                now=now).run(scope, scope_ref, summarizer)


class _Run:
    def __init__(self, session: Session, plane: DataPlane, settings: Settings,
                 tenant_id: uuid.UUID, actor: Actor, *, dry_run: bool,
                 job: JobContext | None, now: Callable[[], datetime]) -> None:
        self.session, self.plane, self.settings = session, plane, settings
        self.tenant_id, self.actor, self.job = tenant_id, actor, job
        self.now = now
        progress = dict(job.progress) if job is not None else {}
        self.counts = Counts.of(progress.get("counts", {}))
        self.counts.dry_run = dry_run
        self.cutoff_text: str | None = progress.get("cutoff")
        self.limits = Thresholds()

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
                self.counts.entries_written += len(self._chunk_sizes(bucket.events))
            return self.counts
        summarizer = summarizer or self._summarizer()
        from ..summarizers import BudgetSpent

        for bucket in buckets:
            if self.job is not None:
                self.job.check()
            try:
                self._bucket(bucket, cutoff, summarizer)
            except BudgetSpent:
                self.counts.budget_spent = True
                break
        return self.counts

    def _summarizer(self) -> Summarizer:
        from ..summarizers import TokenBudget, summarizer_for

        found = summarizer_for(self.session, self.settings, self.tenant_id, TokenBudget())
        self.session.rollback()
        return found

    def _chunk_sizes(self, total: int) -> list[int]:
        """Split ``total`` events into as few entries as the per-entry cap allows, of about
        equal size (each at least half the cap, so never under ``min_events``)."""
        cap = self.settings.compactor_max_events_per_entry
        parts = max(1, -(-total // cap))
        return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]

    def _bucket(self, bucket: Bucket, cutoff: datetime, summarizer: Summarizer) -> None:
        from ..summarizers import SummarizerFailed

        events = repo.bucket_events(self.session, self.tenant_id, bucket, cutoff=cutoff,
                                    limit=bucket.events)
        self.session.rollback()
        if len(events) < self.limits.min_events:
            self._skipped()
            return
        start = written = 0
        for size in self._chunk_sizes(len(events)):
            chunk = events[start:start + size]
            start += size
            try:
                self._chunk(bucket, chunk, summarizer, first=not written)
                written += 1
            except SummarizerFailed as exc:
                self._failed(getattr(exc, "code", "summarizer_failed"))
                return
            except (HashMismatch, SubjectErasureInProgress) as exc:
                self._failed(exc.code)
                return
            except _EmptySummary:
                self._failed("empty_summary")
                return
            except AlreadyCompacted:
                self._skipped()
                return

    def _chunk(self, bucket: Bucket, events: Sequence[MemoryEvent], summarizer: Summarizer,
               *, first: bool) -> None:
        from ..entries import service as entries
        from ..entries.schemas import EntryIn
        from ..events import service as events_service
        from ..summarizers import EventText

        bodies = events_service.read_bodies(self.session, self.plane, self.tenant_id, events,
                                            actor=self.actor)
        if self.session.in_transaction():
            self.session.commit()
        texts = [EventText(e.id, e.kind, e.occurred_at, bodies[e.id]) for e in events]
        del bodies
        summary = summarizer.summarize(bucket.scope, bucket.scope_ref, texts)
        del texts
        if not summary.text.strip():
            raise _EmptySummary()
        # read_bodies served each body only if its stored bytes hash to the event's
        # content_sha256: that is the hash of the body exactly as summarised.
        hashes = [(e.id, e.content_sha256) for e in events]
        self.plane.checkpoint("compact:summarised")
        subjects = {e.subject_user_id for e in events}
        subject = next(iter(subjects)) if len(subjects) == 1 else None
        since, until = events[0].occurred_at, events[-1].occurred_at
        spec = EntryIn(scope=bucket.scope, scope_ref=bucket.scope_ref,
                       title=f"Compacted: {len(events)} events, {since:%Y-%m-%d} – "
                             f"{until:%Y-%m-%d}",
                       summary=summary.text, tags=list(TAGS), importance=IMPORTANCE,
                       user_id=subject)
        after = Counts.of(self.counts.as_dict())
        after.events_compressed += len(events)
        after.entries_written += 1
        if first:  # a bucket counts once, with its first entry
            after.compacted_buckets += 1

        def mark(session: Session, pointer: MemoryPointer) -> None:
            self._mark(session, pointer, bucket, events, hashes, summary, subjects, after)

        entries.create_entry(self.session, self.plane, self.actor, spec, access=EVERYTHING,
                             source_override="compactor", pointer_id=new_id(), extra=mark)
        self.counts = after
        self.plane.checkpoint("compact:committed")

    def _mark(self, session: Session, pointer: MemoryPointer, bucket: Bucket,
              events: Sequence[MemoryEvent], hashes: list[tuple[uuid.UUID, str]],
              summary: Summary, subjects: set[str | None], after: Counts) -> None:
        """Inside the entry's commit transaction: mark, record provenance, save progress."""
        self.plane.checkpoint("compact:marking")
        ensure_writable(session, self.tenant_id, *subjects)
        ids = [e.id for e in events]
        marked = repo.mark_compressed(session, self.tenant_id, ids, utcnow())
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
        if self.job is not None:
            self.job.save(counts=after.as_dict())

    def _skipped(self) -> None:
        self.counts.skipped_buckets += 1
        self._save()

    def _failed(self, code: str) -> None:
        self.counts.failed_buckets += 1
        self.counts.failures[code] = self.counts.failures.get(code, 0) + 1
        log.warning("compaction of a bucket of tenant %s failed (%s); retried next run",
                    self.tenant_id, code)
        self._save()

    def _save(self) -> None:
        if self.session.in_transaction():
            self.session.rollback()
        if self.job is not None:
            self.job.commit_progress(counts=self.counts.as_dict())


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
