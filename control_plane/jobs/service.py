"""Jobs: durable background work with leases (DESIGN §3, §8).

A job is a row in ``jobs``. A worker claims it (``queued`` → ``running``, lease owner and
expiry set), runs its handler and records the outcome (``completed`` with a ``result``, or
back to ``queued`` for another attempt, or ``failed`` after ``job_max_attempts``). While a
handler runs, a heartbeat renews the lease; a worker that dies stops renewing, its lease
expires and another worker takes the job over.

Handlers are written to be resumed: each step saves what it finished into ``progress``
(``JobContext.save``, in the same transaction as the step's own database change where there
is one), and a handler starting on a job that already has progress skips what is done.
``progress`` and ``result`` hold counts, ids and hashes only — never content (I7).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from ..audit import service as audit
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import Job
from ..errors import NotFound
from ..identity import Actor
from ..kit import request_id_var
from ..plane.data_plane import DataPlane
from ..settings import Settings
from . import limits
from . import repository as repo

KINDS = ("export", "erase", "compact")


class LeaseLost(Exception):
    """Another worker took the job over (this one was too slow to renew); stop quietly."""


def enqueue(session: Session, tenant_id: uuid.UUID, kind: str, *, subject: str | None,
            params: dict[str, Any], quota: bool = True) -> Job:
    """Add a queued job to the session's open write transaction (the caller commits).

    Raises ``limits.TooManyJobs`` (429) when the tenant has its quota of ``kind`` jobs queued
    or running already. ``quota=False`` only for a job that is bounded otherwise and queued
    as a side effect of a write that has already happened (a conversation's one summary)."""
    if quota:
        limits.ensure_room(session, tenant_id, kind)
    now = utcnow()
    job = Job(id=new_id(), tenant_id=tenant_id, kind=kind, subject=subject, params=params,
              state="queued", progress={}, result=None, attempts=0, created_at=now,
              updated_at=now, request_id=request_id_var.get())
    session.add(job)
    session.flush()
    return job


def enqueue_once(session: Session, tenant_id: uuid.UUID, kind: str, dedupe_key: str, *,
                 params: dict[str, Any]) -> uuid.UUID | None:
    """Queue a job under a key unique per tenant (``jobs.dedupe_key``) in the session's open
    write transaction; None when a job with that key exists already — also when another
    worker inserts it at the same moment: the unique index decides, never a read first."""
    now = utcnow()
    return repo.insert_unique(session, dict(
        id=new_id(), tenant_id=tenant_id, kind=kind, subject=None, params=params,
        state="queued", progress={}, result=None, attempts=0, created_at=now, updated_at=now,
        dedupe_key=dedupe_key, request_id=request_id_var.get()))


def get_job(session: Session, actor: Actor, job_id: uuid.UUID) -> Job:
    """The caller's own job; another tenant's job id answers 404 like a missing one."""
    with audit.audited(session, actor, "job_read", detail=f"job {job_id}"):
        job = repo.get(session, actor.tenant_id, job_id)
        if job is None:
            raise NotFound(f"no job {job_id}")
        session.rollback()
        begin_write(session)
        audit.record(session, actor, "job_read", detail=f"job {job.id} {job.kind} {job.state}")
        session.commit()
        return job


@dataclass
class JobContext:
    """What a handler gets: its job's identity, a session, the data plane, and ``save``."""

    job_id: uuid.UUID
    tenant_id: uuid.UUID
    kind: str
    subject: str | None
    params: dict[str, Any]
    progress: dict[str, Any]
    attempts: int
    owner: str
    session: Session
    sessions: sessionmaker[Session]
    plane: DataPlane
    settings: Settings
    lease_seconds: float
    lost: Callable[[], bool] = field(default=lambda: False)
    # Called each time the handler reports in (``check``, ``checkpoint``, a save): a step is
    # the work between two reports, and the worker abandons an attempt whose step overruns
    # MEMPLANE_JOB_STEP_SECONDS (``supervisor``).
    beat: Callable[[], None] = field(default=lambda: None)
    # The worker's clock: a lease renewed by saving progress expires on the same clock the
    # other workers read when they look for expired leases.
    clock: Callable[[], datetime] = field(default=utcnow)

    @property
    def actor(self) -> Actor:
        return Actor(self.tenant_id, "system", f"job:{self.job_id}")

    def save(self, **updates: Any) -> None:
        """Record finished work in ``progress`` inside the session's open write transaction
        (commit it with the step's own change). Raises LeaseLost if the job was taken over.
        """
        self.save_in(self.session, **updates)

    def save_in(self, session: Session, **updates: Any) -> None:
        """``save`` in another session's open write transaction (a handler's own thread)."""
        self.update_in(session, lambda progress: {**progress, **updates})

    def update_in(self, session: Session,
                  change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Replace ``progress`` with ``change(progress as stored)`` in the session's open write
        transaction, the job's row locked: threads of one handler that each add to a count
        never overwrite each other's. Raises LeaseLost if the job was taken over."""
        self.check()
        job = session.get(Job, self.job_id, populate_existing=True, with_for_update=True)
        if (job is None or job.lease_owner != self.owner or job.state != "running"
                or job.attempts != self.attempts):  # a later attempt, maybe by this worker
            raise LeaseLost(str(self.job_id))
        self.progress = change(dict(job.progress or {}))
        now = self.clock()
        job.progress = self.progress
        job.updated_at = now
        job.lease_expires_at = now + timedelta(seconds=self.lease_seconds)

    def commit_progress(self, **updates: Any) -> None:
        """``save`` in a transaction of its own."""
        if self.session.in_transaction():
            self.session.commit()
        begin_write(self.session)
        self.save(**updates)
        self.session.commit()

    def check(self) -> None:
        """Report in between two pieces of work; raises LeaseLost if the job is no longer
        this attempt's (taken over, or abandoned after a step overran its bound)."""
        self.beat()
        if self.lost():
            raise LeaseLost(str(self.job_id))

    def checkpoint(self, step: str) -> None:
        """Crash tests stop a job here, between two of its steps; also a report (``beat``)."""
        self.beat()
        self.plane.checkpoint(f"{self.kind}:{step}")
