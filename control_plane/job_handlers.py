"""The server's job worker: which handler runs each kind of job, and the chores between jobs.

``jobs.worker.Worker`` claims and runs jobs of any kind; this module gives it the server's:
export and erasure (compliance), compaction, retention and cleanup, and the summarising of
conversations. Between jobs the worker also queues the daily compaction and retention runs
when they are due (``MEMPLANE_COMPACTOR_SCHEDULE``, ``MEMPLANE_RETENTION_SCHEDULE``;
``tick_schedule``, ``tick_retention``), and deletes export archives past their expiry
(``MEMPLANE_EXPORT_TTL_HOURS``) and idempotent writes' stored answers past their retention, at
most every ``EXPIRY_SWEEP_SECONDS``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from . import idempotency
from .compactor import service as compactor
from .compliance import erasure, export
from .conversations import repository as conversations_repo
from .conversations import service as conversations
from .conversations import summarize
from .db.base import utcnow
from .db.engine import begin_write
from .jobs import repository as jobs_repo
from .jobs.daily import DailyRuns
from .jobs.service import JobContext
from .jobs.supervisor import Monotonic
from .jobs.worker import Chore, Clock, Handler, Pause, Worker, wait_on_event
from .plane.data_plane import DataPlane
from .remember import service as remember
from .remember.schemas import MessageIn, RememberIn
from .retention import cleanup, sweep
from .retention import schedule as retention_schedule
from .schedules import parse_schedule
from .settings import Settings

log = logging.getLogger(__name__)

EXPIRY_SWEEP_SECONDS = 60.0
_EXPIRY_BATCH = 100
REMEMBER_RECENT = 10  # the messages a message's remember job reads, its own included


def handlers_by_kind() -> dict[str, Handler]:
    """The handler of every kind of job the server queues."""
    return {"export": export.run, "erase": erasure.run, "compact": compactor.run_job,
            "retention": sweep.run_job, "cleanup": cleanup.run_cleanup_job,
            "summarize_conversation": summarize.run_job,
            conversations.REMEMBER_JOB_KIND: remember_after_message}


def remember_after_message(ctx: JobContext) -> dict[str, Any]:
    """Remember over a conversation's recent messages (those up to the one that asked) for
    its user; the result holds counts, never content."""
    row = conversations_repo.get_by_row(ctx.session, ctx.tenant_id,
                                        uuid.UUID(ctx.params["conversation"]))
    if row is None or row.subject_user_id is None:
        ctx.session.rollback()
        return {"remembered": False,
                "reason": "conversation_deleted" if row is None else "no_user"}
    through = int(ctx.params["through"])
    rows = conversations_repo.messages(ctx.session, row.id,
                                       after=max(0, through - REMEMBER_RECENT), through=through)
    stored = conversations.read_messages(ctx.session, ctx.plane, ctx.actor, rows)
    if not stored:
        return {"remembered": False, "reason": "no_messages"}
    body = RememberIn(messages=[MessageIn.model_validate({"role": m.role, "content": m.content})
                                for m in stored],
                      user_id=row.subject_user_id, agent_id=row.agent_id,
                      conversation_id=row.conversation_id)
    answer = remember.remember(ctx.session, ctx.plane, ctx.settings, ctx.actor, body,
                               seqs=[m.row.seq for m in stored])
    counts = {e.lower(): sum(d.event == e for d in answer.decisions)
              for e in ("ADD", "UPDATE", "DELETE", "NONE")}
    return {"remembered": True, "extractor": answer.extractor, "messages": len(stored),
            **counts}


class JobWorker(Worker):
    """A worker with the server's handlers (unless ``handlers`` names others) and chores."""

    def __init__(self, sessions: sessionmaker[Session], plane: DataPlane, settings: Settings,
                 *, owner: str | None = None, handlers: dict[str, Handler] | None = None,
                 lease_seconds: float | None = None, clock: Clock = utcnow,
                 pause: Pause = wait_on_event, monotonic: Monotonic = time.monotonic,
                 chores: bool = True) -> None:
        super().__init__(sessions, plane, settings, owner=owner,
                         handlers=handlers if handlers is not None else handlers_by_kind(),
                         lease_seconds=lease_seconds, clock=clock, pause=pause,
                         monotonic=monotonic)
        self.compaction_runs = DailyRuns(parse_schedule(settings.compactor_schedule),
                                         compactor.queue_daily_runs, "compaction")
        self.retention_runs = DailyRuns(parse_schedule(settings.retention_schedule,
                                                       "MEMPLANE_RETENTION_SCHEDULE"),
                                        retention_schedule.queue_daily_runs, "retention")
        # A process's other job threads leave the chores to its first one.
        self.chores = () if not chores else (
            Chore(self.expire_exports, "could not delete expired export archives; retrying "
                  "later", every=EXPIRY_SWEEP_SECONDS),
            Chore(self.purge_idempotency, "could not purge expired idempotency answers; "
                  "retrying later", every=EXPIRY_SWEEP_SECONDS),
            Chore(self.tick_schedule, "could not queue the scheduled compaction runs; retrying"),
            Chore(self.tick_retention, "could not queue the scheduled retention runs; retrying"),
        )

    def tick_schedule(self) -> int:
        """Queue today's compaction runs once the schedule's fire time has passed (at most
        one attempt per worker and day; the unique job key makes it one run per tenant and
        day across workers); how many this worker queued."""
        return self.compaction_runs.tick(self.sessions, self.clock(), self.owner)

    def tick_retention(self) -> int:
        """Queue today's retention runs once ``MEMPLANE_RETENTION_SCHEDULE`` has fired (one
        run per tenant and UTC day across workers, by the unique job key)."""
        return self.retention_runs.tick(self.sessions, self.clock(), self.owner)

    def expire_exports(self) -> int:
        """Delete every export archive whose expiry has passed (each deletion audited as
        ``export_expire``, the job's result marked ``expired_at``); returns how many."""
        now = self.clock()
        expired = 0
        with self.sessions() as session:
            while True:
                batch = jobs_repo.expired_exports(session, now, _EXPIRY_BATCH)
                session.rollback()
                failed = 0
                for job_id in batch:
                    try:
                        expired += export.expire(session, self.plane, job_id, now)
                    except Exception as exc:
                        session.rollback()
                        failed += 1
                        log.warning("could not expire the archive of export job %s: %s",
                                    job_id, type(exc).__name__)
                if len(batch) < _EXPIRY_BATCH or failed:
                    return expired

    def purge_idempotency(self) -> int:
        """Delete the stored answers of idempotent writes past their retention (24 h), so a
        key's answer — which may name a data subject — does not stay forever; how many."""
        with self.sessions() as session:
            begin_write(session)
            purged = idempotency.purge_expired(session)
            session.commit()
        return purged
