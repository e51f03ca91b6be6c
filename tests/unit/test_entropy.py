"""Random bytes drawn a block at a time: each byte of the generator handed out once, none
shared between threads or with a forked child."""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid

import pytest

from control_plane.db.base import new_id
from storage_adapters import entropy


@pytest.fixture
def counting_source(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The kernel's generator replaced by a counter (byte i of the stream is i % 251) for the
    test's own thread, with no block drawn yet; returns the sizes it was asked for. Threads
    an earlier test left running (a pool, a server) still get the kernel's bytes and are
    not counted."""
    stream = itertools.count()
    asked: list[int] = []
    kernel, test_thread = os.urandom, threading.get_ident()

    def urandom(n: int) -> bytes:
        if threading.get_ident() != test_thread:
            return kernel(n)
        asked.append(n)
        return bytes(next(stream) % 251 for _ in range(n))

    monkeypatch.setattr(entropy.os, "urandom", urandom)
    monkeypatch.setattr(entropy, "_local", threading.local())
    return asked


def test_small_requests_share_a_block_and_never_reuse_a_byte(counting_source: list[int]) -> None:
    taken = [entropy.token_bytes(10) for _ in range(410)]
    # 409 requests of 10 bytes fit in the first 4,096-byte block; the 410th starts a new
    # block (its 6 leftover bytes are dropped, not handed out again).
    assert counting_source == [4096, 4096]
    assert b"".join(taken[:409]) == bytes(i % 251 for i in range(4090))
    assert taken[409] == bytes(i % 251 for i in range(4096, 4106))


def test_another_threads_draws_are_not_counted(counting_source: list[int]) -> None:
    theirs: list[bytes] = []
    other = threading.Thread(target=lambda: theirs.append(os.urandom(10)))
    other.start()
    other.join()
    assert len(theirs[0]) == 10
    assert counting_source == []


def test_a_large_request_goes_straight_to_the_kernel(counting_source: list[int]) -> None:
    assert len(entropy.token_bytes(12)) == 12
    assert len(entropy.token_bytes(1000)) == 1000
    assert counting_source == [4096, 1000]
    assert entropy.token_bytes(0) == b""
    with pytest.raises(ValueError):
        entropy.token_bytes(-1)


def test_threads_never_get_the_same_bytes() -> None:
    seen: list[list[bytes]] = [[] for _ in range(8)]

    def draw(mine: list[bytes]) -> None:
        mine.extend(entropy.token_bytes(16) for _ in range(3000))

    threads = [threading.Thread(target=draw, args=(mine,)) for mine in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    drawn = [b for mine in seen for b in mine]
    assert len(drawn) == 24000
    assert len(set(drawn)) == len(drawn)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_repeat_its_parents_bytes() -> None:
    entropy.token_bytes(16)  # a block is in use when the process forks
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next bytes to the parent, then exit at once
        try:
            os.write(write_end, entropy.token_bytes(32))
        finally:
            os._exit(0)
    os.close(write_end)
    mine = entropy.token_bytes(32)
    with os.fdopen(read_end, "rb") as pipe:
        theirs = pipe.read()
    os.waitpid(child, 0)
    assert len(theirs) == 32
    assert theirs != mine


def test_new_ids_are_version_7_in_time_order_and_distinct() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(5000)]
    after = time.time_ns() // 1_000_000
    assert {i.version for i in ids} == {7}
    assert {i.variant for i in ids} == {uuid.RFC_4122}
    stamps = [i.int >> 80 for i in ids]
    assert stamps == sorted(stamps)
    assert before <= stamps[0] and stamps[-1] <= after
    assert len(set(ids)) == len(ids)
