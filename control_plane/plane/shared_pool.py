"""Thread pools shared by all tenants, in which no tenant's work waits behind another's.

A plain pool shared by every tenant lets one tenant's slow bucket take every worker, and
everyone else's work queues behind it. A :class:`SharedPool` never queues: a task goes to a
worker only while one is idle and its tenant has fewer than ``share`` tasks in the pool;
otherwise the submitting thread runs it itself, at once. A tenant so occupies at most
``share`` workers, and no task ever waits for a worker that another tenant's bucket holds.

A task handed to a worker carries a slot of its tenant's bulkhead, taken by the submitting
thread before the hand-off (``Bulkhead.try_acquire``): the worker never waits for one, and a
tenant whose bulkhead is full gets its work run in its own (request) thread, where the
bulkhead waits or refuses with 503 ``storage_busy`` as for any other call. A task must call
only its tenant's buckets (or the default bucket), and must not wait for other tasks of the
pool. ``map`` stops running tasks once one has failed.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from .bulkhead import Bulkhead, Bulkheads, prepaid

T = TypeVar("T")
R = TypeVar("R")


class SharedPool:
    """``workers`` threads (started on first use) shared by all tenants, at most ``share``
    of them (default: half) running one tenant's tasks."""

    def __init__(self, workers: int, name: str, *, share: int | None = None) -> None:
        if workers < 1:
            raise ValueError("a shared pool needs at least one worker")
        self.workers, self.name = workers, name
        self.share = max(1, workers // 2) if share is None else share
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.busy = 0  # tasks handed to workers and not yet finished
        self._of: dict[uuid.UUID, int] = {}  # the same, per tenant

    def running(self, tenant_id: uuid.UUID) -> int:
        """How many of the tenant's tasks are in the pool now."""
        with self._lock:
            return self._of.get(tenant_id, 0)

    def submit(self, tenant_id: uuid.UUID, bulkheads: Bulkheads | None,
               fn: Callable[..., R], *args: Any) -> Future[R]:
        """``fn(*args)`` on a worker, or here and now if the pool has no room for the
        tenant (the future is then done)."""
        with self._lock:
            room = self.busy < self.workers and self._of.get(tenant_id, 0) < self.share
            if room:
                self.busy += 1
                self._of[tenant_id] = self._of.get(tenant_id, 0) + 1
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.workers,
                                                        thread_name_prefix=self.name)
                executor = self._executor
        if not room:
            return _here(fn, *args)
        bulkhead = bulkheads.find(tenant_id) if bulkheads is not None else None
        if bulkhead is not None and not bulkhead.try_acquire():
            self._done(tenant_id)
            return _here(fn, *args)
        try:
            # in the caller's context: the work's log lines carry its request id
            return executor.submit(contextvars.copy_context().run, self._run, tenant_id,
                                   bulkhead, fn, *args)
        except BaseException:  # shut down: nothing will run it
            if bulkhead is not None:
                bulkhead.release()
            self._done(tenant_id)
            raise

    def map(self, tenant_id: uuid.UUID, bulkheads: Bulkheads | None,
            fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` over ``items``, answers in order; the first failure is raised (tasks not
        started by then are not run)."""
        futures: list[Future[R]] = []
        for item in items:
            if any(f.done() and f.exception() is not None for f in futures):
                break
            futures.append(self.submit(tenant_id, bulkheads, fn, item))
        return [f.result() for f in futures]

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _run(self, tenant_id: uuid.UUID, bulkhead: Bulkhead | None,
             fn: Callable[..., R], *args: Any) -> R:
        try:
            if bulkhead is None:
                return fn(*args)
            try:
                with prepaid(bulkhead):
                    return fn(*args)
            finally:
                bulkhead.release()
        finally:
            self._done(tenant_id)

    def _done(self, tenant_id: uuid.UUID) -> None:
        with self._lock:
            self.busy -= 1
            left = self._of[tenant_id] - 1
            if left:
                self._of[tenant_id] = left
            else:
                del self._of[tenant_id]


def _here(fn: Callable[..., R], *args: Any) -> Future[R]:
    done: Future[R] = Future()
    try:
        done.set_result(fn(*args))
    except Exception as exc:  # raised by ``result()``, as from a worker
        done.set_exception(exc)
    return done
