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
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from storage_adapters import base as storage

from ..errors import StorageUnavailable

RETRY_AFTER_SECONDS = 2


class StorageBusy(storage.StorageUnavailable, StorageUnavailable):
    """The tenant's bulkhead is full: refused without touching the bucket.

    An adapter error (code that handles an unreachable bucket — retries, health reports,
    jobs — handles this too) and the API's 503 wherever it surfaces."""

    def __init__(self, calls: int, waiters: int) -> None:
        StorageUnavailable.__init__(
            self,
            f"too many of this tenant's storage calls are waiting on its bucket (at most "
            f"{calls} at once and {waiters} waiting, per server process): the bucket is slow "
            "or not answering; retry later, with fewer requests at once",
            retry_after=RETRY_AFTER_SECONDS, problem="storage_busy")


class Bulkhead:
    """At most ``calls`` holders at once and ``waiters`` threads waiting, each at most
    ``wait_seconds``; anyone else is refused with :class:`StorageBusy`."""

    def __init__(self, calls: int, waiters: int, wait_seconds: float) -> None:
        if calls < 1 or waiters < 0 or wait_seconds < 0:
            raise ValueError("a bulkhead needs calls >= 1, waiters >= 0, wait_seconds >= 0")
        self.calls, self.waiters, self.wait_seconds = calls, waiters, wait_seconds
        self.running = 0
        self.waiting = 0
        self._free = threading.Condition(threading.Lock())

    def acquire(self) -> None:
        with self._free:
            if self.running < self.calls:
                self.running += 1
                return
            if self.waiting >= self.waiters:
                raise StorageBusy(self.calls, self.waiters)
            self.waiting += 1
            try:
                deadline = time.monotonic() + self.wait_seconds
                while self.running >= self.calls:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise StorageBusy(self.calls, self.waiters)
                    self._free.wait(left)
                self.running += 1
            finally:
                self.waiting -= 1

    def release(self) -> None:
        with self._free:
            self.running -= 1
            self._free.notify()

    @contextmanager
    def slot(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


class Bulkheads:
    """One :class:`Bulkhead` per tenant, made when the tenant's first bucket is."""

    def __init__(self, calls: int, waiters: int, wait_seconds: float) -> None:
        self.calls, self.waiters, self.wait_seconds = calls, waiters, wait_seconds
        self._tenants: dict[uuid.UUID, Bulkhead] = {}
        self._lock = threading.Lock()

    def of(self, tenant_id: uuid.UUID) -> Bulkhead:
        with self._lock:
            found = self._tenants.get(tenant_id)
            if found is None:
                found = self._tenants[tenant_id] = Bulkhead(self.calls, self.waiters,
                                                            self.wait_seconds)
            return found


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

    def _enter(self) -> None:
        try:
            self.bulkhead.acquire()
        except StorageBusy:
            self._refused()
            raise

    def _call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._enter()
        try:
            return function(*args, **kwargs)
        finally:
            self.bulkhead.release()

    def _stream(self, function: Callable[..., Iterable[Any]], *args: Any,
                **kwargs: Any) -> Iterator[Any]:
        self._enter()
        try:
            items = iter(function(*args, **kwargs))
        finally:
            self.bulkhead.release()
        try:
            while True:
                self._enter()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    self.bulkhead.release()
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
