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

``submit(..., defer=True)`` is for a caller that will ask every answer (``result()``) in the
order it submitted: a task that finds no room is not run at once but kept, and runs on the
first of the tenant's own workers to finish its task, or in the caller's thread when it asks
for the answer first — whichever comes first. The caller so keeps doing its own work while
the tenant's workers are busy, and no worker idles while the caller packs. Kept tasks wait
only for workers the tenant already holds, never for another tenant's.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
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
        self.busy = 0  # workers running tasks
        self._of: dict[uuid.UUID, int] = {}  # the same, per tenant
        self._kept: dict[uuid.UUID, deque[_Task[Any]]] = {}  # deferred, not yet run

    def running(self, tenant_id: uuid.UUID) -> int:
        """How many of the pool's workers run the tenant's tasks now."""
        with self._lock:
            return self._of.get(tenant_id, 0)

    def submit(self, tenant_id: uuid.UUID, bulkheads: Bulkheads | None,
               fn: Callable[..., R], *args: Any, defer: bool = False) -> Future[R]:
        """``fn(*args)`` on a worker, or, if the pool has no room for the tenant: here and
        now (the future is then done), or with ``defer`` kept for the tenant's next free
        worker or the first ``result()``, whichever comes first."""
        task: _Task[R] = _Task(self, fn, args)
        with self._lock:
            room = self.busy < self.workers and self._of.get(tenant_id, 0) < self.share
            if room or not defer:
                task.claim()
            if room:
                self.busy += 1
                self._of[tenant_id] = self._of.get(tenant_id, 0) + 1
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.workers,
                                                        thread_name_prefix=self.name)
                executor = self._executor
            elif defer:
                task.context = contextvars.copy_context()  # run elsewhere, later
                self._kept.setdefault(tenant_id, deque()).append(task)
                return task
        if not room:
            task.run_here()
            return task
        bulkhead = bulkheads.find(tenant_id) if bulkheads is not None else None
        if bulkhead is not None and not bulkhead.try_acquire():
            self._done(tenant_id)
            task.run_here()
            return task
        try:
            # in the caller's context: the work's log lines carry its request id
            executor.submit(contextvars.copy_context().run, self._serve, tenant_id,
                            bulkhead, task)
        except BaseException:  # shut down: nothing will run it
            if bulkhead is not None:
                bulkhead.release()
            self._done(tenant_id)
            raise
        return task

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

    def _serve(self, tenant_id: uuid.UUID, bulkhead: Bulkhead | None,
               task: _Task[Any]) -> None:
        """Run ``task``, then the tenant's kept tasks while there are any, on one worker
        holding one slot of the tenant's bulkhead."""
        running: _Task[Any] | None = task
        try:
            while running is not None:
                with nullcontext() if bulkhead is None else prepaid(bulkhead):
                    running.run_here()
                running = self._next_kept(tenant_id)
        finally:
            if bulkhead is not None:
                bulkhead.release()
            self._done(tenant_id)

    def _next_kept(self, tenant_id: uuid.UUID) -> _Task[Any] | None:
        with self._lock:
            kept = self._kept.get(tenant_id)
            while kept:
                task = kept.popleft()
                if task.claim():
                    return task
            self._kept.pop(tenant_id, None)
            return None

    def _done(self, tenant_id: uuid.UUID) -> None:
        with self._lock:
            self.busy -= 1
            left = self._of[tenant_id] - 1
            if left:
                self._of[tenant_id] = left
            else:
                del self._of[tenant_id]


class _Task(Future[R]):
    """A task's future. It runs once, where it is claimed first: a worker or the caller."""

    def __init__(self, pool: SharedPool, fn: Callable[..., R], args: tuple[Any, ...]) -> None:
        super().__init__()
        self._pool, self._fn, self._args = pool, fn, args
        self._claimed = False
        self.context: contextvars.Context | None = None  # a kept task's, from its caller

    def claim(self) -> bool:
        """Whether the claimer is the one to run it (under the pool's lock)."""
        if self._claimed:
            return False
        self._claimed = True
        return self.set_running_or_notify_cancel()  # False: cancelled

    def run_here(self) -> None:
        fn, args, context = self._fn, self._args, self.context
        del self._fn, self._args  # a done task holds nothing of its work
        try:
            self.set_result(fn(*args) if context is None else context.run(fn, *args))
        except Exception as exc:  # raised by ``result()``, as from a worker
            self.set_exception(exc)

    def result(self, timeout: float | None = None) -> R:
        if not self._claimed:
            with self._pool._lock:
                mine = self.claim()
            if mine:
                self.run_here()
        return super().result(timeout)
