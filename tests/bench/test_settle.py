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
