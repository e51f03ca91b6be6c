"""The process's budget of threads in calls to tenants' own buckets, all tenants together.

Each tenant's bulkhead (bulkhead.py) bounds what its own slow bucket holds; this bounds what
several tenants' slow buckets hold together. At most ``threads`` threads (request threads
and shared pool workers) run or wait in calls to tenants' buckets at once; the last
``reserved`` of them go only to a tenant holding fewer than ``LIGHT`` — one whose bucket
answers, since a tenant whose calls hang holds every thread it gets. Hostile tenants
together so hold at most ``threads - reserved`` (plus fewer than ``LIGHT`` each from the
reserve), a tenant with a healthy bucket keeps calls of its own, and the request threads
beyond ``threads`` stay free for everything that touches no tenant's bucket.

A refusal is a :class:`StorageCrowded`: a 503 ``storage_busy`` with ``Retry-After``, like a
full bulkhead's. The budget takes no lock of its own: its bulkheads change it under
``lock``, the one lock they all share.
"""

from __future__ import annotations

import sys
import threading

from storage_adapters import base as storage

from ..errors import StorageUnavailable

RETRY_AFTER_SECONDS = 2
# A tenant holding fewer threads than this may take one of the reserved.
LIGHT = 2


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


class StorageCrowded(StorageBusy):
    """The process's budget is spent by tenants' slow buckets: refused without touching the
    bucket."""

    def __init__(self, threads: int, reserved: int) -> None:
        StorageUnavailable.__init__(
            self,
            f"too many storage calls of this server are waiting on slow buckets (at most "
            f"{threads} in all tenants' buckets per server process, the last {reserved} kept "
            f"for tenants with fewer than {LIGHT} in theirs), and this tenant already has "
            "calls under way: retry later, with fewer requests at once",
            retry_after=RETRY_AFTER_SECONDS, problem="storage_busy")


class StorageBudget:
    """``threads`` threads in tenants' buckets in all, ``reserved`` of them only for a
    tenant holding fewer than ``LIGHT``. ``total`` is how many are taken now."""

    def __init__(self, threads: int, reserved: int) -> None:
        if threads < 1 or not 0 <= reserved < threads:
            raise ValueError("a storage budget needs threads >= 1 and 0 <= reserved < threads")
        self.threads, self.reserved = threads, reserved
        self.total = 0
        self.lock = threading.Lock()

    @classmethod
    def unlimited(cls) -> StorageBudget:
        return cls(sys.maxsize, 0)

    def could_take(self, held: int, more: int = 1) -> bool:
        """Whether a tenant holding ``held`` threads may take ``more`` (hold ``lock``)."""
        total = self.total + more - 1
        if total < self.threads - self.reserved:
            return True
        return held + more - 1 < LIGHT and total < self.threads

    def take(self, held: int) -> None:
        """One more thread for a tenant holding ``held``, or :class:`StorageCrowded`
        (hold ``lock``)."""
        if not self.could_take(held):
            raise StorageCrowded(self.threads, self.reserved)
        self.total += 1

    def give_back(self) -> None:
        """(hold ``lock``)"""
        self.total -= 1
