"""The per-tenant bulkhead (control_plane/plane/bulkhead.py) on its own: slots,
waiters, refusal, and that every way out of a call — an answer, an error, a stream read to
its end, dropped half way or failing — gives its slot back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control_plane.errors import DomainError
from control_plane.plane.bulkhead import Bulkhead, BulkheadedAdapter, StorageBusy
from storage_adapters import base as storage
from storage_adapters.local import LocalAdapter
from storage_adapters.memory import MemoryAdapter

BUSY = ("too many of this tenant's storage calls are waiting on its bucket (at most 2 at once "
        "and 1 waiting, per server process): the bucket is slow or not answering; retry "
        "later, with fewer requests at once")


def _until(condition: Any, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalAdapter]:
    adapter = LocalAdapter(tmp_path / "bucket")
    yield adapter
    adapter.close()


def test_a_full_bulkhead_refuses_at_once_and_a_waiter_gets_the_freed_slot(
        local: LocalAdapter) -> None:
    local.put("a/one.json", b"1")
    bulkhead = Bulkhead(calls=2, waiters=1, wait_seconds=30)
    refusals: list[int] = []
    guarded = BulkheadedAdapter(local, bulkhead, lambda: refusals.append(1))
    bulkhead.acquire()
    bulkhead.acquire()  # both slots held, as by two calls stuck in the bucket
    answers: list[bytes] = []
    waiter = threading.Thread(target=lambda: answers.append(guarded.get("a/one.json")))
    waiter.start()
    _until(lambda: bulkhead.waiting == 1)

    with pytest.raises(StorageBusy) as refused:
        guarded.get("a/one.json")  # a slot is busy and so is the one place to wait
    assert (bulkhead.running, bulkhead.waiting, len(refusals)) == (2, 1, 1)
    assert answers == []

    bulkhead.release()
    waiter.join(timeout=60)
    assert answers == [b"1"]
    assert (bulkhead.running, bulkhead.waiting) == (1, 0)
    # what the API answers
    error = refused.value
    assert isinstance(error, storage.StorageUnavailable) and isinstance(error, DomainError)
    assert (error.status_code, error.body(), error.headers) == (
        503, {"error": "storage_unavailable", "detail": BUSY, "problem": "storage_busy"},
        {"Retry-After": "2"})


def test_a_waiter_is_refused_when_its_wait_runs_out(local: LocalAdapter) -> None:
    bulkhead = Bulkhead(calls=1, waiters=4, wait_seconds=0.2)
    guarded = BulkheadedAdapter(local, bulkhead, lambda: None)
    bulkhead.acquire()
    started = time.monotonic()
    with pytest.raises(StorageBusy):
        guarded.head("a/missing.json")
    assert time.monotonic() - started >= 0.2
    assert (bulkhead.running, bulkhead.waiting) == (1, 0)
    bulkhead.release()
    with pytest.raises(storage.ObjectNotFound):  # the slot is free: the call reaches the bucket
        guarded.head("a/missing.json")
    assert bulkhead.running == 0


def test_an_error_of_the_bucket_gives_the_slot_back(local: LocalAdapter) -> None:
    bulkhead = Bulkhead(calls=1, waiters=0, wait_seconds=0)
    guarded = BulkheadedAdapter(local, bulkhead, lambda: None)
    for _ in range(3):
        with pytest.raises(storage.ObjectNotFound):
            guarded.get("a/missing.json")
        with pytest.raises(storage.InvalidPath):
            guarded.put("../escape", b"x")
    assert bulkhead.running == 0
    guarded.put("a/two.json", b"2")  # one slot, not leaked: still usable
    assert guarded.get("a/two.json") == b"2"


class _Listing:
    """A backend whose listing reports, at each item, how many slots were held then."""

    scheme = "test"

    def __init__(self, bulkhead: Bulkhead, fail_at: int | None = None) -> None:
        self.bulkhead = bulkhead
        self.fail_at = fail_at
        self.held: list[int] = []
        self.closed = False

    def list(self, prefix: str) -> Iterator[str]:
        try:
            for n in range(5):
                self.held.append(self.bulkhead.running)
                if n == self.fail_at:
                    raise storage.StorageUnavailable("the connection dropped")
                yield f"{prefix}{n}"
        finally:
            self.closed = True


def test_a_stream_holds_a_slot_only_inside_the_bucket() -> None:
    bulkhead = Bulkhead(calls=1, waiters=0, wait_seconds=0)
    inner = _Listing(bulkhead)
    guarded = BulkheadedAdapter(inner, bulkhead, lambda: None)
    seen = []
    for item in guarded.list("p/"):
        # between items no slot is held: the consumer may make another call of the tenant
        assert bulkhead.running == 0
        with bulkhead.slot():
            seen.append(item)
    assert seen == ["p/0", "p/1", "p/2", "p/3", "p/4"]
    assert inner.held == [1] * 5 and inner.closed
    assert bulkhead.running == 0


def test_a_stream_dropped_half_way_or_failing_gives_everything_back() -> None:
    bulkhead = Bulkhead(calls=1, waiters=0, wait_seconds=0)
    inner = _Listing(bulkhead)
    stream = BulkheadedAdapter(inner, bulkhead, lambda: None).list("p/")
    assert [next(stream), next(stream)] == ["p/0", "p/1"]
    stream.close()
    assert inner.closed and bulkhead.running == 0

    failing = _Listing(bulkhead, fail_at=2)
    with pytest.raises(storage.StorageUnavailable):
        list(BulkheadedAdapter(failing, bulkhead, lambda: None).list("p/"))
    assert failing.closed and bulkhead.running == 0


def test_a_stream_is_refused_on_its_first_item_when_full() -> None:
    bulkhead = Bulkhead(calls=1, waiters=0, wait_seconds=0)
    refusals: list[int] = []
    inner = _Listing(bulkhead)
    stream = BulkheadedAdapter(inner, bulkhead, lambda: refusals.append(1)).list("p/")
    with bulkhead.slot(), pytest.raises(StorageBusy):
        next(stream)
    assert (inner.held, refusals, bulkhead.running) == ([], [1], 0)


def test_optional_calls_stay_optional_and_are_guarded(local: LocalAdapter) -> None:
    bulkhead = Bulkhead(calls=1, waiters=0, wait_seconds=0)
    guarded = BulkheadedAdapter(local, bulkhead, lambda: None)
    plain = BulkheadedAdapter(MemoryAdapter(), bulkhead, lambda: None)
    assert isinstance(guarded, storage.StreamingAdapter)
    assert not isinstance(plain, storage.StreamingAdapter)
    assert guarded.scheme == local.scheme and guarded.stats is local.stats
    local.put("a/big.json", b"x" * 10)
    with bulkhead.slot():  # full: every call that reaches the bucket is refused
        assert guarded.storage_class_name("archive") == local.storage_class_name("archive")
        for call in (lambda: list(guarded.iter_chunks("a/big.json", 4)),
                     lambda: guarded.put_many([("a/c.json", b"c")]),
                     lambda: guarded.set_storage_class("a/big.json", "archive"),
                     lambda: guarded.describe(), lambda: guarded.health_check(),
                     lambda: list(guarded.list_versions("a/")),
                     lambda: guarded.purge_versions("a/big.json"),
                     lambda: guarded.delete_many(["a/big.json"])):
            with pytest.raises(StorageBusy):
                call()
    assert b"".join(guarded.iter_chunks("a/big.json", 4)) == b"x" * 10
    assert bulkhead.running == 0


def test_one_tenant_may_take_at_most_half_the_request_threads(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from control_plane.settings import REQUEST_THREADS, Settings

    half = REQUEST_THREADS // 2
    fits = Settings(data_dir=tmp_path, storage_calls_per_tenant=half - 4,
                    storage_waiters_per_tenant=4)
    assert (fits.storage_calls_per_tenant, fits.storage_waiters_per_tenant) == (half - 4, 4)
    with pytest.raises(ValidationError, match="MEMPLANE_STORAGE_CALLS_PER_TENANT \\+ "
                       "MEMPLANE_STORAGE_WAITERS_PER_TENANT must be at most 20, half the "
                       "server's 40 request threads"):
        Settings(data_dir=tmp_path, storage_calls_per_tenant=half - 4,
                 storage_waiters_per_tenant=5)
