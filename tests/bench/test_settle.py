"""The bench waits for the server's background work between cases: a case measured next (a
floor, the peer) must not pay for the indexing and sealing of what memplane wrote before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.stacks import Backends, MemplaneStack
from control_plane.audit import service as audit
from control_plane.search import indexer


@pytest.fixture
def stack() -> Iterator[MemplaneStack]:
    backends = Backends()
    stack = MemplaneStack(backends, "sqlite", "local")
    try:
        yield stack
    finally:
        stack.close()
        backends.close()


def test_settle_waits_for_every_vector_and_every_seal(stack: MemplaneStack) -> None:
    stack.set("one", {"text": "a memory to index"})
    with pytest.raises(TimeoutError) as waited:
        stack.settle(timeout=0.2)
    assert "memories to index: True, audit rows to seal: True" in str(waited.value)

    runtime = stack.runtime
    with runtime.sessions() as session:
        report = indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
    assert report.embedded == 1
    with pytest.raises(TimeoutError) as waited:
        stack.settle(timeout=0.2)
    assert "memories to index: False, audit rows to seal: True" in str(waited.value)

    with runtime.sessions() as session:
        assert audit.seal_all(session) >= 1
    stack.settle(timeout=0.2)  # nothing left: returns at once


def test_a_write_sent_unsearchable_leaves_the_indexer_nothing_to_do(
        stack: MemplaneStack) -> None:
    """The sustained case's "without search": the same write, ``searchable: false``, waits
    for its sealing only; a searchable one waits for its vector too."""
    from control_plane.addresses import MemoryAddress, Scope
    from control_plane.memories import service as memories
    from control_plane.memories.schemas import MemoryMeta

    runtime = stack.runtime
    with runtime.sessions() as session:
        memories.set_value(session, runtime.plane, stack.actor,
                           MemoryAddress.parse(Scope.user, "bench", "plain"),
                           {"text": "never embedded"}, MemoryMeta(searchable=False))
    with pytest.raises(TimeoutError) as waited:
        stack.settle(timeout=0.1, poll=0.01)
    assert "memories to index: False, audit rows to seal: True" in str(waited.value)
    with runtime.sessions() as session:
        assert audit.seal_all(session) >= 1
    stack.settle(timeout=0.2, poll=0.01)

    stack.set("indexed", {"text": "embedded"})
    with pytest.raises(TimeoutError) as waited:
        stack.settle(timeout=0.1, poll=0.01)
    assert "memories to index: True" in str(waited.value)
