"""Per-tenant bulkheads: a tenant's slow or dead bucket holds a bounded number of threads.

Every call to a tenant's own bucket goes through its tenant's :class:`Bulkhead`: at most
``calls`` run at once (in this process), at most ``waiters`` more wait for one of them to
finish, each for at most ``wait_seconds``. A caller beyond that, or one whose wait runs out,
is refused at once with :class:`StorageBusy` — a 503 ``storage_unavailable`` with
``problem: storage_busy`` and ``Retry-After``. A bucket that answers slowly or never can so
hold at most ``calls + waiters`` of the server's request threads (calls end at the adapter's
own overall deadline, waits at ``wait_seconds``), and other tenants keep the rest.

One bulkhead covers all of a tenant's own buckets (its configurations, its agents' user
memory buckets, the probe of a configuration being saved), so adding buckets gives no more
threads. The operator's default bucket has none: it is the operator's, not a party that can
be made slow by a tenant, and tenants on it share it whatever a bulkhead would say.

A listing or streamed read holds a slot only while it is inside the backend (each ``next``),
never between items: a consumer that is slow, or that makes other calls of the same tenant
between items, neither keeps a slot nor waits on itself, and a generator dropped half way
holds nothing.

Bulkheads alone would let a few tenants together hold every request thread (three of them,
each with calls + waiters threads, outnumber the server's). So all of a process's bulkheads
also draw on one :class:`~.budget.StorageBudget`: at most ``threads`` threads running or
waiting in calls to tenants' buckets in all, of which the last ``reserved`` go only to
tenants holding fewer than two — tenants whose buckets answer. A tenant refused by it gets the
same 503 ``storage_busy``. Work handed to a shared thread pool takes its tenant's slot before
it is handed over (:meth:`Bulkhead.try_acquire`, :func:`prepaid`; shared_pool.py).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from .budget import RETRY_AFTER_SECONDS, StorageBudget, StorageBusy, StorageCrowded

__all__ = ["RETRY_AFTER_SECONDS", "Bulkhead", "BulkheadedAdapter", "Bulkheads",
           "StorageBudget", "StorageBusy", "StorageCrowded", "prepaid"]

class Bulkhead:
    """At most ``calls`` holders at once and ``waiters`` threads waiting, each at most
    ``wait_seconds``; anyone else is refused with :class:`StorageBusy`. Every thread it
    holds (running or waiting) is one of ``budget``'s; without one, the process's other
    bulkheads are not counted."""

    def __init__(self, calls: int, waiters: int, wait_seconds: float,
                 budget: StorageBudget | None = None) -> None:
        if calls < 1 or waiters < 0 or wait_seconds < 0:
            raise ValueError("a bulkhead needs calls >= 1, waiters >= 0, wait_seconds >= 0")
        self.calls, self.waiters, self.wait_seconds = calls, waiters, wait_seconds
        self.budget = budget or StorageBudget.unlimited()
        self.running = 0
        self.waiting = 0
        # the budget's lock: a tenant's counts and the process's total change together
        self._free = threading.Condition(self.budget.lock)

    def acquire(self) -> None:
        budget = self.budget
        with self._free:
            if self.running < self.calls:
                budget.take(self.running + self.waiting)
                self.running += 1
                return
            if self.waiting >= self.waiters:
                raise StorageBusy(self.calls, self.waiters)
            budget.take(self.running + self.waiting)
            self.waiting += 1
            try:
                deadline = time.monotonic() + self.wait_seconds
                while self.running >= self.calls:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        budget.give_back()
                        raise StorageBusy(self.calls, self.waiters)
                    self._free.wait(left)
                self.running += 1  # the waiting thread's share of the budget carries over
            finally:
                self.waiting -= 1

    def try_acquire(self) -> bool:
        """A slot now, without waiting, for work about to be handed to another thread
        (shared_pool.py) — only if the tenant could still take one more after it, so the
        handing thread is never refused its own call for the work it handed away."""
        with self._free:
            if self.running >= self.calls or not self.budget.could_take(
                    self.running + self.waiting, more=2):
                return False
            self.budget.take(self.running + self.waiting)
            self.running += 1
            return True

    def release(self) -> None:
        with self._free:
            self.running -= 1
            self.budget.give_back()
            self._free.notify()

    @contextmanager
    def slot(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


# The bulkheads whose slot the current thread was handed with its work (``prepaid``).
_handed = threading.local()


@contextmanager
def prepaid(bulkhead: Bulkhead) -> Iterator[None]:
    """Run the block as the holder of a slot of ``bulkhead`` taken for it by another thread
    (which gives it back): calls to the tenant's buckets made inside take no other."""
    held: list[Bulkhead] = _handed.__dict__.setdefault("bulkheads", [])
    held.append(bulkhead)
    try:
        yield
    finally:
        held.pop()


def _holds(bulkhead: Bulkhead) -> bool:
    return any(b is bulkhead for b in _handed.__dict__.get("bulkheads", ()))


class Bulkheads:
    """One :class:`Bulkhead` per tenant, made when the tenant's first bucket is, all drawing
    on one :class:`StorageBudget` of ``threads`` (``reserved`` of them for tenants holding
    fewer than two; by default, no limit but the bulkheads')."""

    def __init__(self, calls: int, waiters: int, wait_seconds: float, *,
                 threads: int | None = None, reserved: int = 0) -> None:
        self.calls, self.waiters, self.wait_seconds = calls, waiters, wait_seconds
        self.budget = (StorageBudget.unlimited() if threads is None
                       else StorageBudget(threads, reserved))
        self._tenants: dict[uuid.UUID, Bulkhead] = {}
        self._lock = threading.Lock()

    def of(self, tenant_id: uuid.UUID) -> Bulkhead:
        with self._lock:
            found = self._tenants.get(tenant_id)
            if found is None:
                found = self._tenants[tenant_id] = Bulkhead(self.calls, self.waiters,
                                                            self.wait_seconds, self.budget)
            return found

    def find(self, tenant_id: uuid.UUID) -> Bulkhead | None:
        """The tenant's bulkhead if one of its own buckets was opened in this process (a
        tenant on the default bucket has none)."""
        with self._lock:
            return self._tenants.get(tenant_id)


# Calls that never reach the backend; everything else an adapter offers is guarded.
_LOCAL_CALLS = frozenset({"close", "storage_class_name"})
_STREAMS = frozenset({"list", "list_versions", "iter_chunks"})


class BulkheadedAdapter:
    """A tenant's adapter whose every backend call takes a slot of the tenant's bulkhead.

    Optional calls (``put_file``, ``iter_chunks``, ``put_many``, ``delete_versions``, …)
    exist only when the wrapped adapter has them, so capability checks still see the truth;
    plain attributes (``scheme``, ``stats``) are the wrapped adapter's own.
    ``refused`` is called once per refusal (the metric)."""

    def __init__(self, inner: Any, bulkhead: Bulkhead, refused: Callable[[], None]) -> None:
        self.inner = inner
        self.bulkhead = bulkhead
        self._refused = refused

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        found = getattr(self.inner, name)
        if not callable(found) or name in _LOCAL_CALLS or name.startswith("_"):
            return found
        if name in _STREAMS:
            return lambda *args, **kwargs: self._stream(found, *args, **kwargs)
        return lambda *args, **kwargs: self._call(found, *args, **kwargs)

    def _enter(self) -> bool:
        """Take a slot; False when this thread already holds one handed to it (``prepaid``)
        and so takes none, and gives none back."""
        if _holds(self.bulkhead):
            return False
        try:
            self.bulkhead.acquire()
        except StorageBusy:
            self._refused()
            raise
        return True

    def _leave(self, took: bool) -> None:
        if took:
            self.bulkhead.release()

    def _call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        took = self._enter()
        try:
            return function(*args, **kwargs)
        finally:
            self._leave(took)

    def _stream(self, function: Callable[..., Iterable[Any]], *args: Any,
                **kwargs: Any) -> Iterator[Any]:
        took = self._enter()
        try:
            items = iter(function(*args, **kwargs))
        finally:
            self._leave(took)
        try:
            while True:
                took = self._enter()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    self._leave(took)
                yield item
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    # The hot calls, without a closure per call.
    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        return self._call(self.inner.get, path, max_bytes)  # type: ignore[no-any-return]

    def put(self, path: str, data: bytes) -> None:
        self._call(self.inner.put, path, data)

    def head(self, path: str) -> Any:
        return self._call(self.inner.head, path)

    def delete_many(self, paths: Iterable[str]) -> int:
        return self._call(self.inner.delete_many, paths)  # type: ignore[no-any-return]

    def list(self, prefix: str) -> Iterator[Any]:
        return self._stream(self.inner.list, prefix)

    def close(self) -> None:
        self.inner.close()
