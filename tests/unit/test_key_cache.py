"""The cache of unwrapped subject keys: least recently used out first, each for its TTL,
and a forgotten key (a subject's erasure) never served again."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from control_plane.plane.keyring import KeyCache


def test_the_least_recently_used_key_goes_first() -> None:
    cache = KeyCache(2, 60)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    cache.put(a, b"A" * 32)
    cache.put(b, b"B" * 32)
    assert cache.get(a) == b"A" * 32  # a is now the most recent
    cache.put(c, b"C" * 32)
    assert (cache.get(a), cache.get(b), cache.get(c)) == (b"A" * 32, None, b"C" * 32)
    assert len(cache) == 2


def test_a_key_expires_after_its_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    cache = KeyCache(10, 30)
    key_id = uuid.uuid4()
    cache.put(key_id, b"K" * 32)
    now[0] += 29.9
    assert cache.get(key_id) == b"K" * 32
    now[0] += 0.2
    assert cache.get(key_id) is None
    assert len(cache) == 0


def test_a_forgotten_key_is_not_served_and_size_zero_keeps_nothing() -> None:
    cache = KeyCache(10, 60)
    kept, gone = uuid.uuid4(), uuid.uuid4()
    cache.put(kept, b"1" * 32)
    cache.put(gone, b"2" * 32)
    cache.forget([gone])
    assert (cache.get(kept), cache.get(gone)) == (b"1" * 32, None)
    off = KeyCache(0, 60)
    off.put(kept, b"1" * 32)
    assert (off.get(kept), len(off)) == (None, 0)


def test_reads_while_other_threads_put_and_forget_never_see_a_forgotten_key() -> None:
    cache = KeyCache(64, 60)
    ids = [uuid.uuid4() for _ in range(200)]
    forgotten: set[uuid.UUID] = set()
    served_after_forget: list[uuid.UUID] = []
    wrong: list[uuid.UUID] = []
    stop = threading.Event()

    def churn() -> None:
        for n, key_id in enumerate(ids):
            cache.put(key_id, key_id.bytes * 2)
            if n % 3 == 0:
                cache.forget([key_id])
                forgotten.add(key_id)
        stop.set()

    def read() -> None:
        while not stop.is_set():
            for key_id in list(forgotten):
                if cache.get(key_id) is not None:
                    served_after_forget.append(key_id)
            for key_id in ids:
                value = cache.get(key_id)
                if value is not None and value != key_id.bytes * 2:
                    wrong.append(key_id)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    churn()
    for reader in readers:
        reader.join()
    assert (served_after_forget, wrong) == ([], [])
    assert len(cache) <= 64
