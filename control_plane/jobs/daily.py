"""A day's scheduled runs, queued by the workers once the schedule has fired.

Each job worker ticks every daily schedule between jobs (``Worker``'s chores): once the day's
fire time has passed, the feature's ``queue`` queues that day's run for every tenant under a
unique job key of the day, so however many workers tick, each tenant gets one run per UTC day.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import date, datetime

from sqlalchemy.orm import Session, sessionmaker

from ..audit import service as audit
from ..db.engine import begin_write
from ..identity import Actor
from ..schedules import Schedule
from .service import enqueue_once

log = logging.getLogger(__name__)

# (sessions, day, owner) -> how many runs of ``day`` this call queued.
QueueRuns = Callable[[sessionmaker[Session], date, str], int]


class DailyRuns:
    """One daily schedule and how its runs are queued; ``what`` names them in the log."""

    def __init__(self, schedule: Schedule, queue: QueueRuns, what: str) -> None:
        self.schedule = schedule
        self.queue = queue
        self.what = what
        self._day: date | None = None

    def tick(self, sessions: sessionmaker[Session], now: datetime, owner: str) -> int:
        """Queue today's runs once the schedule's fire time has passed (at most one attempt
        per worker and day; the unique job key makes it one run per tenant and day across
        workers); how many this worker queued."""
        due = self.schedule.due_today(now)
        if due is None or self._day == due.date():
            return 0
        queued = self.queue(sessions, due.date(), owner)
        self._day = due.date()
        if queued:
            log.info("queued %d scheduled %s run(s) for %s", queued, self.what, due.date())
        return queued


def queue_for(session: Session, tenant_ids: Iterable[uuid.UUID], kind: str, key: str,
              day: date, owner: str, operation: str, what: str) -> int:
    """Queue ``day``'s scheduled ``kind`` job for each tenant under the unique job ``key``,
    each with its audit row; how many this call queued (a tenant already holding the day's
    job is passed over, so racing workers queue each once)."""
    queued = 0
    for tenant_id in tenant_ids:
        begin_write(session)
        job_id = enqueue_once(session, tenant_id, kind, key,
                              params={"dry_run": False, "scheduled_for": day.isoformat()})
        if job_id is None:
            session.rollback()
            continue
        audit.record(session, Actor(tenant_id, "system", f"scheduler:{owner}"), operation,
                     detail=f"scheduled {what} job {job_id} queued for {day.isoformat()}")
        session.commit()
        queued += 1
    return queued
