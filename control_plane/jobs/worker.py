"""The job worker: claim, run under a renewed lease, record the outcome.

Run inside the server (``Runtime`` starts one thread when ``run_jobs`` is on, the embedded
default) or as its own process with ``memplane worker`` (production: turn ``run_jobs`` off
on the API replicas and run as many workers as wanted; PostgreSQL's ``FOR UPDATE SKIP
LOCKED`` keeps them from claiming the same job). Tenants take turns (``repository.next_claimable``),
no tenant runs more than ``MEMPLANE_JOB_TENANT_CONCURRENCY`` jobs at once, and an attempt
whose step overruns ``MEMPLANE_JOB_STEP_SECONDS`` is abandoned (``supervisor``).

A worker runs each job with the handler its ``handlers`` give the job's kind, and does its
``chores`` between jobs (the server's are registered by ``control_plane.job_handlers``). Time
comes from an injectable ``clock`` and the heartbeat waits through an injectable ``pause``, so
tests move time and release each lease renewal themselves instead of sleeping.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from ..audit import service as audit
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import Job
from ..identity import Actor
from ..kit import request_id_var
from ..plane.data_plane import DataPlane
from ..settings import Settings
from . import repository as repo
from .service import JobContext, LeaseLost
from .supervisor import Abandoned, HandlerThread, Monotonic, StepWatch, supervise

log = logging.getLogger(__name__)

Handler = Callable[[JobContext], dict[str, Any]]
Clock = Callable[[], datetime]
# Waits up to the given seconds or until the event is set; True when it was set.
Pause = Callable[[threading.Event, float], bool]

# A claim passes over a tenant whose last slot another worker just took; each round means
# another worker's claim succeeded, so this many in a row only on a very busy queue.
_CLAIM_ROUNDS = 1000


def _causes(error: BaseException) -> str:
    """The error's type and its causes' (``StorageUnavailable <- ReadTimeoutError``): names
    only, never a message, which may name a path or a bucket."""
    names: list[str] = []
    seen: set[int] = set()
    at: BaseException | None = error
    while at is not None and id(at) not in seen and len(names) < 4:
        seen.add(id(at))
        names.append(type(at).__name__)
        at = at.__cause__ or at.__context__
    return " <- ".join(names)


def wait_on_event(stop: threading.Event, seconds: float) -> bool:
    return stop.wait(seconds)


@dataclass(frozen=True)
class Chore:
    """Work a worker does between jobs: ``run`` before every claim, or with ``every`` at
    most once in that many seconds. When it raises, ``failure`` is logged as a warning and
    it is tried again next time."""

    run: Callable[[], object]
    failure: str
    every: float = 0.0


class Worker:
    def __init__(self, sessions: sessionmaker[Session], plane: DataPlane, settings: Settings,
                 *, owner: str | None = None, handlers: Mapping[str, Handler] | None = None,
                 chores: Sequence[Chore] = (), lease_seconds: float | None = None,
                 clock: Clock = utcnow, pause: Pause = wait_on_event,
                 monotonic: Monotonic = time.monotonic) -> None:
        self.sessions = sessions
        self.plane = plane
        self.settings = settings
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.handlers: Mapping[str, Handler] = handlers if handlers is not None else {}
        self.chores: Sequence[Chore] = chores
        self.lease_seconds = lease_seconds or settings.job_lease_seconds
        self.clock = clock
        self.pause = pause
        self.monotonic = monotonic
        self.abandoned = Abandoned()

    def run_forever(self, stop: threading.Event) -> None:
        """Do the chores that are due, claim and run jobs, until ``stop`` is set; sleep
        between polls when idle."""
        due = [0.0] * len(self.chores)
        while not stop.is_set():
            now = time.monotonic()
            for i, chore in enumerate(self.chores):
                if chore.every:
                    if now < due[i]:
                        continue
                    due[i] = now + chore.every
                try:
                    chore.run()
                except Exception:
                    log.warning(chore.failure)
            try:
                ran = self.run_once()
            except Exception:
                log.exception("job worker failed; retrying")
                ran = None
            if ran is None:
                stop.wait(self.settings.job_poll_interval_seconds)

    def run_once(self) -> uuid.UUID | None:
        """Claim the oldest runnable job and run it to its end; None when there was none."""
        job = self._claim()
        if job is None:
            return None
        self._run(job)
        return job.id

    def claim(self) -> Job | None:
        """Claim the next runnable job (tenants in turn) without running it; None if none."""
        return self._claim()

    def _claim(self) -> Job | None:
        with self.sessions() as session:
            for _ in range(_CLAIM_ROUNDS):
                per_tenant = self.settings.job_tenant_concurrency
                # A tenant whose abandoned attempts still hang here gets no more threads.
                stuck = self.abandoned.tenants_at(per_tenant)
                begin_write(session)
                now = self.clock()
                job = repo.next_claimable(session, now, per_tenant=per_tenant,
                                          skip_tenants=stuck)
                if job is None:
                    session.rollback()
                    return None
                if not repo.room_to_run(session, job.tenant_id, now, per_tenant):
                    session.rollback()  # another worker took the tenant's last slot: again
                    continue
                actor = Actor(job.tenant_id, "system", f"worker:{self.owner}")
                if job.state == "running":
                    # Its worker died (the lease ran out without renewal): take it over.
                    audit.record(session, actor, "job_takeover",
                                 detail=f"job {job.id} {job.kind} from {job.lease_owner} "
                                        f"after attempt {job.attempts}")
                    if job.attempts >= self.settings.job_max_attempts:
                        job.state, job.lease_owner, job.lease_expires_at = "failed", None, None
                        job.error = f"gave up after {job.attempts} attempts (worker died)"
                        job.result = {"error": job.error}
                        job.updated_at = now
                        session.commit()
                        continue
                job.state = "running"
                job.attempts += 1
                job.lease_owner = self.owner
                job.lease_expires_at = now + timedelta(seconds=self.lease_seconds)
                job.claimed_at = now
                job.updated_at = now
                session.commit()
                return job
            log.warning("could not claim a job in %d rounds (other workers kept taking the "
                        "slots); trying again later", _CLAIM_ROUNDS)
            return None

    def _run(self, job: Job) -> None:
        token = request_id_var.set(job.request_id)  # the worker's lines about it carry it too
        try:
            self._attempt(job)
        finally:
            request_id_var.reset(token)

    def _attempt(self, job: Job) -> None:
        handler = self.handlers.get(job.kind) or _missing
        session = self.sessions()
        lost = threading.Event()
        watch = StepWatch(self.settings.job_step_seconds, self.monotonic)
        ctx = JobContext(
            job_id=job.id, tenant_id=job.tenant_id, kind=job.kind, subject=job.subject,
            params=dict(job.params or {}), progress=dict(job.progress or {}),
            attempts=job.attempts, owner=self.owner, session=session, sessions=self.sessions,
            plane=self.plane, settings=self.settings, lease_seconds=self.lease_seconds,
            lost=lost.is_set, clock=self.clock, beat=watch.beat,
        )
        runner = HandlerThread(handler, ctx, session, job.request_id)
        started, outcome = time.perf_counter(), "completed"
        runner.start()
        try:
            ended = supervise(self.sessions, job.id, self.owner, self.lease_seconds,
                              self.clock, self.pause, runner.done, watch, lost)
            if not ended and runner.abandon():
                lost.set()  # it stops at its next report, if its call ever returns
                self.abandoned.add(job.tenant_id, runner)
                outcome = "abandoned"
                log.warning("job %s attempt %d abandoned: a step ran longer than %g s",
                            job.id, job.attempts, watch.bound)
                with self.sessions() as fresh:
                    self._finish(fresh, job, error=watch.timeout(), lock_timeout=True)
                return
            error = runner.error
            if error is None:
                self._finish(session, job, result=runner.result)
            elif isinstance(error, LeaseLost):
                outcome = "taken_over"
                log.warning("job %s was taken over by another worker", job.id)
                session.rollback()
            elif isinstance(error, Exception):
                outcome = ("failed" if job.attempts >= self.settings.job_max_attempts
                           else "retried")
                session.rollback()
                log.warning("job %s attempt %d failed: %s", job.id, job.attempts,
                            _causes(error))
                self._finish(session, job, error=error)
            else:
                raise error  # a crash test's stop: as if the process died here
        finally:
            if outcome != "abandoned":
                session.close()
            metrics = getattr(self.plane, "metrics", None)
            if metrics is not None:
                metrics.job_duration.labels(job.kind, outcome).observe(
                    time.perf_counter() - started)

    def _finish(self, session: Session, job: Job, *, result: dict[str, Any] | None = None,
                error: Exception | None = None, lock_timeout: bool = False) -> None:
        if session.in_transaction():
            session.commit()
        begin_write(session)
        if lock_timeout and session.get_bind().dialect.name == "postgresql":
            # An abandoned handler may hold the job's row: give up rather than wait on it
            # (the lease, no longer renewed, then runs out and the job is taken over).
            session.execute(text("SET LOCAL lock_timeout = '5s'"))
        now = utcnow()
        values: dict[str, Any] = dict(lease_owner=None, lease_expires_at=None, updated_at=now)
        if error is None:
            values.update(state="completed", result=result, error=None)
        else:
            message = _describe(error)
            if job.attempts >= self.settings.job_max_attempts:
                values.update(state="failed", error=message, result={"error": message})
            else:
                values.update(state="queued", error=message)
        try:
            done = session.execute(
                update(Job).where(Job.id == job.id, Job.lease_owner == self.owner,
                                  Job.state == "running", Job.attempts == job.attempts)
                .values(**values)
            )
        except OperationalError:
            if not lock_timeout:
                raise
            session.rollback()
            log.warning("job %s was busy; its lease will run out instead", job.id)
            return
        if not done.rowcount:  # type: ignore[attr-defined]
            log.warning("job %s was taken over before it could be recorded", job.id)
        else:
            log.info("job %s %s attempt %d %s by worker %s", job.id, job.kind, job.attempts,
                     values["state"], self.owner)
        session.commit()


def _missing(ctx: JobContext) -> dict[str, Any]:
    raise ValueError(f"no handler for job kind {ctx.kind!r}")


def _describe(exc: Exception) -> str:
    from ..errors import DomainError

    if isinstance(exc, DomainError):
        return f"{exc.code}: {exc.detail}"
    return f"{type(exc).__name__}: {str(exc)[:300]}"
