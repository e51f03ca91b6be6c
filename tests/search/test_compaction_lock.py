"""Indexers in several processes on PostgreSQL (each host's background process, each
``memplane worker``) compact a scope one at a time: while one holds the scope's compaction
lock, another leaves the scope as it is, and compacts it once the lock is free."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import SearchSegment
from control_plane.embedders.service import embedder_for
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.search import claims, indexer, segment_writing
from tests.support.service import ServiceWorld

pytestmark = pytest.mark.databases("postgres")


def _segments(world: ServiceWorld, ref: str) -> list[tuple[str, int]]:
    with world.runtime.sessions() as session:
        return sorted((s.kind, s.rows) for s in session.scalars(
            select(SearchSegment).where(SearchSegment.tenant_id == world.tenant_id,
                                        SearchSegment.scope_ref == ref)))


def _compact(world: ServiceWorld, ref: str) -> bool:
    with world.runtime.sessions() as session:
        model = embedder_for(session, world.runtime, world.tenant_id).name
        session.commit()
        return segment_writing.compact_due(session, world.runtime.plane,
                                           world.runtime.search_cache, world.tenant_id,
                                           "agent", ref, model, compact_after=3)


def test_a_scope_another_process_compacts_is_left_until_its_lock_is_free(
        world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        indexer.drain(session, world.runtime.plane, world.runtime, world.runtime.search_cache)
        for i in range(3):
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.agent, "locked", f"k{i}"),
                               f"note {i}", MemoryMeta())
            indexer.drain(session, world.runtime.plane, world.runtime,
                          world.runtime.search_cache, batch=1, compact_after=100)
    assert _segments(world, "locked") == [("delta", 1)] * 3

    key = {"c": claims._COMPACT_CLASS,
           "k": claims.scope_key(world.tenant_id, "agent", "locked")}
    with world.runtime.engine.connect() as other:  # another process, compacting the scope
        assert other.scalar(text("SELECT pg_try_advisory_lock(:c, :k)"), key) is True
        assert _compact(world, "locked") is False
        assert _segments(world, "locked") == [("delta", 1)] * 3
        assert _compact(world, "elsewhere") is False  # nothing due there: no lock taken
        other.execute(text("SELECT pg_advisory_unlock(:c, :k)"), key)
        other.commit()
    assert _compact(world, "locked") is True
    assert _segments(world, "locked") == [("snapshot", 3)]
    with world.runtime.engine.connect() as after:  # the compactor let its lock go
        assert after.scalar(text("SELECT pg_try_advisory_lock(:c, :k)"), key) is True
        after.execute(text("SELECT pg_advisory_unlock(:c, :k)"), key)
