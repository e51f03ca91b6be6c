"""One attempt at a job under a time bound per step (``MEMPLANE_JOB_STEP_SECONDS``).

A handler reports in between two pieces of its work (``JobContext.check``, ``checkpoint`` and
every save of progress); a *step* is the work between two reports. The handler runs in a
thread of its own (``HandlerThread``) while the worker's thread renews the lease every third
of its length (``supervise``) — but only while the current step is within its bound. A step
that overruns (a call into a tenant's bucket that hangs, say) gets no more renewals: the
worker abandons the attempt, records it as failed (retried later, or ``failed`` after
``MEMPLANE_JOB_MAX_ATTEMPTS``) and goes on to the next job, so one tenant's stuck job cannot
keep a worker, nor its lease, for longer than the bound. The abandoned thread cannot be
stopped from outside; it is told its attempt is lost and stops at its next report (its saves
check the attempt number as well), and closes its own session when its call returns. While
a tenant has ``MEMPLANE_JOB_TENANT_CONCURRENCY`` such threads still stuck in a worker, that
worker claims none of its jobs (``Abandoned``), so the threads a tenant's dead bucket holds
stay bounded.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from ..db.engine import begin_write
from ..kit import request_id_var
from . import repository as repo
from .service import JobContext

log = logging.getLogger(__name__)

Monotonic = Callable[[], float]
# Waits up to the given seconds or until the event is set; True when it was set.
Pause = Callable[[threading.Event, float], bool]


class StepTimeout(Exception):
    """A step of the job ran longer than MEMPLANE_JOB_STEP_SECONDS without reporting in."""


class StepWatch:
    """When the handler last reported in, on a monotonic clock."""

    def __init__(self, bound: float, monotonic: Monotonic = time.monotonic) -> None:
        self.bound = bound
        self._monotonic = monotonic
        self._last = monotonic()

    def beat(self) -> None:
        self._last = self._monotonic()

    def overdue(self) -> bool:
        return self._monotonic() - self._last > self.bound

    def remaining(self) -> float:
        return max(0.0, self.bound - (self._monotonic() - self._last))

    def timeout(self) -> StepTimeout:
        return StepTimeout(f"a step ran longer than {self.bound:g} s without progress "
                           f"(MEMPLANE_JOB_STEP_SECONDS); the attempt was abandoned")


class HandlerThread:
    """Runs ``handler(ctx)`` in a daemon thread; ``done`` is set when it has returned or
    raised (``result`` / ``error``). After ``abandon`` the thread owns ``session`` and
    closes it itself; before, the worker does once ``done`` is set."""

    def __init__(self, handler: Callable[[JobContext], dict[str, Any]], ctx: JobContext,
                 session: Session, request_id: str | None = None) -> None:
        self.handler, self.ctx, self.session = handler, ctx, session
        self.request_id = request_id  # of the request that queued the job: its logs carry it
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._abandoned = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"job-{ctx.job_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def abandon(self) -> bool:
        """Leave the thread to itself; False if it finished meanwhile (nothing left behind)."""
        with self._lock:
            if self.done.is_set():
                return False
            self._abandoned = True
            return True

    def _run(self) -> None:
        request_id_var.set(self.request_id)  # this thread's own context
        try:
            self.result = self.handler(self.ctx)
        except BaseException as exc:  # handed to the worker's thread, which re-raises it
            self.error = exc
        finally:
            with self._lock:
                self.done.set()
                orphan = self._abandoned
            if orphan:
                try:
                    self.session.rollback()
                    self.session.close()
                except Exception:
                    log.warning("could not close the session of abandoned job %s",
                                self.ctx.job_id)


def supervise(sessions: sessionmaker[Session], job_id: uuid.UUID, owner: str,
              lease_seconds: float, clock: Callable[[], datetime], pause: Pause,
              done: threading.Event, watch: StepWatch, lost: threading.Event) -> bool:
    """Renew the job's lease every third of its length until the handler is done (True), or
    until a step overruns its bound (False: no renewal after that). A lease found taken over
    sets ``lost`` and is not renewed again; the handler is still waited for, within the bound.
    """
    while not pause(done, lease_seconds / 3):
        if watch.overdue():
            return False
        try:
            with sessions() as session:
                begin_write(session)
                now = clock()
                held = repo.renew(session, job_id, owner,
                                  now + timedelta(seconds=lease_seconds), now)
                session.commit()
        except Exception:
            log.warning("could not renew the lease of job %s; retrying", job_id)
            continue
        if not held:
            lost.set()
            break
    while not done.is_set():
        if watch.overdue():
            return False
        done.wait(watch.remaining() + 0.01)
    return True


class Abandoned:
    """The handler threads a worker left behind, by tenant, until they end."""

    def __init__(self) -> None:
        self._threads: dict[uuid.UUID, list[HandlerThread]] = {}

    def add(self, tenant_id: uuid.UUID, thread: HandlerThread) -> None:
        self._threads.setdefault(tenant_id, []).append(thread)

    def stuck(self, tenant_id: uuid.UUID) -> int:
        return len([t for t in self._threads.get(tenant_id, []) if t.alive()])

    def tenants_at(self, limit: int) -> set[uuid.UUID]:
        """Tenants with at least ``limit`` abandoned threads still running."""
        for tenant_id in list(self._threads):
            alive = [t for t in self._threads[tenant_id] if t.alive()]
            if alive:
                self._threads[tenant_id] = alive
            else:
                del self._threads[tenant_id]
        return {tenant_id for tenant_id, alive in self._threads.items() if len(alive) >= limit}
