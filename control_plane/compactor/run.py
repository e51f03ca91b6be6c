"""One compaction run of a tenant: its due buckets read, summarised and written, three stages
side by side.

A reader thread reads the next chunk's bodies (``selection``), the run's own thread
summarises (``summarise``), writer threads put and commit the groups of entries before
(``writing``). With a job, counts are saved in its progress with each commit, and a job
taken over resumes with them (and with the first attempt's cutoff).

A bucket whose summariser fails (``SummarizerFailed``) is skipped and counted; it is retried
on the next run. A spent token budget (``BudgetSpent``) ends the run cleanly. Results and
progress hold counts only (I7).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from ..identity import Actor
from ..jobs.service import JobContext
from ..plane.data_plane import DataPlane
from ..settings import Settings
from . import repository as repo
from .counts import Counts
from .selection import Reader, Thresholds, chunk_sizes, thresholds
from .summarise import EmptySummary, summarise, tenant_summarizer
from .writing import GROUP_ENTRIES, PUTTERS, Event, Group, Outcome, Write, Writer

if TYPE_CHECKING:
    from ..summarizers import Summarizer


class Run:
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
        summarizer = summarizer or tenant_summarizer(self.session, self.settings,
                                                     self.tenant_id)
        from ..summarizers import BudgetSpent, SummarizerFailed

        # Three stages overlap: a reader thread reads the next chunk's bodies, this thread
        # summarises, writer threads put and commit the groups of entries before. Each
        # entry commits with its events' marks, in its group's one transaction.
        reader = Reader(self.session, self.plane, self.tenant_id, self.actor,
                        min_events=self.limits.min_events, chunk_sizes=self.chunk_sizes,
                        buckets=buckets, cutoff=cutoff)
        writer = Writer(self, self.writers)
        self.put_pool = ThreadPoolExecutor(max_workers=PUTTERS,
                                           thread_name_prefix="compact-put")
        group: list[Write] = []
        try:
            for item in reader:
                key = (item.bucket.scope, item.bucket.scope_ref)
                if key in self.done:
                    continue
                if item.first and self.job is not None:
                    self.job.check()
                if item.error is not None:
                    self.done.add(key)
                    writer.submit(Outcome(key, failed=item.error.code))
                    continue
                if item.events is None:
                    writer.submit(Outcome(key, skipped=True))
                    continue
                assert item.bodies is not None
                try:
                    summary = summarise(item, summarizer)
                except BudgetSpent:
                    writer.submit(Outcome(key, budget_spent=True))
                    break
                except SummarizerFailed as exc:
                    self.done.add(key)
                    writer.submit(Outcome(key, failed=exc.code))
                    continue
                except EmptySummary:
                    self.done.add(key)
                    writer.submit(Outcome(key, failed="empty_summary"))
                    continue
                self.plane.checkpoint("compact:summarised")
                # Only what the write needs of each event goes on: the loaded rows (and
                # their ORM state) are let go as soon as the chunk is summarised.
                covered = [Event(e.id, e.occurred_at, e.content_sha256, e.subject_user_id)
                           for e in item.events]
                group.append(Write(item.bucket, covered, summary, item.first))
                if len(group) >= self.group_size:
                    writer.submit(Group(group))
                    group = []
            if group:
                writer.submit(Group(group))
            writer.finish()
        except BaseException:
            writer.abort()
            raise
        finally:
            reader.close()
            self.put_pool.shutdown()
        return self.counts

    def chunk_sizes(self, total: int) -> list[int]:
        """Split ``total`` events into as few entries as the per-entry cap allows, of about
        equal size (each at least half the cap, so never under ``min_events``)."""
        return chunk_sizes(total, self.settings.compactor_max_events_per_entry)

    def add(self, delta: Counts) -> None:
        with self._counts_lock:
            self.counts = self.counts.plus(delta)

    def save(self, session: Session, delta: Counts) -> None:
        """Add ``delta`` to the counts in the job's progress (the row locked), in the
        session's open write transaction."""
        if self.job is None:
            return

        def change(progress: dict[str, Any]) -> dict[str, Any]:
            stored = Counts.of(progress.get("counts", {}))
            return {**progress, "counts": stored.plus(delta).as_dict()}

        self.job.update_in(session, change)
