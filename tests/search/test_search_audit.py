"""A search's own audit row, on SQLite and PostgreSQL: exactly one per search, naming the
number of hits it answered, whichever way it was written. On PostgreSQL a search that serves
no values writes it in its last live statement (one round trip): only when that statement
ends the search — the kept state still current, enough candidates live at their vectors'
versions, or none left to check — else the next statement, or the audit batcher, does."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog
from control_plane.identity import Actor
from control_plane.kit import request_id_var
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.search import indexer
from control_plane.search import service as search
from control_plane.search.schemas import SearchIn
from tests.search.test_search_state import _count_checked, driver_statements
from tests.support.service import ServiceWorld

FACTS = {"pet": "the dog is called biscuit and fears thunder",
         "job": "works night shifts as a nurse at the hospital",
         "food": "allergic to peanuts and loves thai curry",
         "home": "lives in a narrow house by the canal with a red door"}
SEARCH = "scope=agent ref=(given) user=None type=None tags=0 -> "


def _set(runtime: Runtime, world: ServiceWorld, facts: dict[str, str], *,
         index: bool = True) -> None:
    with runtime.sessions() as session:
        for key, text in facts.items():
            memories.set_value(session, runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.agent, "a-1", key), text, MemoryMeta())
        if index:
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)


def _find(runtime: Runtime, actor: Actor, query: str, limit: int) -> list[str]:
    with runtime.sessions() as session:
        found = search.search(session, runtime, actor, SearchIn(
            query=query, scope=Scope.agent, scope_ref="a-1", limit=limit,
            include_values=False))
    return [h.key or "" for h in found.hits]


def _rows(world: ServiceWorld) -> list[Any]:
    with world.runtime.sessions() as session:
        return list(session.execute(select(
            AccessLog.accessor_type, AccessLog.accessor_id, AccessLog.agent_id,
            AccessLog.success, AccessLog.detail, AccessLog.request_id, AccessLog.pointer_id)
            .where(AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "search")
            .order_by(AccessLog.id)).all())


def _counts(world: ServiceWorld) -> list[int]:
    rows = _rows(world)
    assert all(r.detail.startswith(SEARCH) for r in rows), [r.detail for r in rows]
    return [int(r.detail.removeprefix(SEARCH)) for r in rows]


def test_a_warm_search_without_values_audits_itself_in_one_statement(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    _set(world.runtime, world, FACTS)
    agent = Actor(world.tenant_id, "agent", "key-7", agent_id="planner")
    _find(world.runtime, agent, "dog biscuit", 2)  # reads and keeps the state
    token = request_id_var.set("req-42")
    try:
        with driver_statements(world.runtime.engine, monkeypatch) as seen:
            keys = _find(world.runtime, agent, "nurse hospital", 2)
    finally:
        request_id_var.reset(token)
    rows = _rows(world)

    assert keys[0] == "job" and len(keys) == 2
    # The live filter and the audit row in one statement; on SQLite the row goes to the
    # audit batcher's own connection.
    assert seen == (["WITH"] if world.runtime.engine.dialect.name == "postgresql"
                    else ["SELECT"])
    assert [tuple(r) for r in rows] == [
        ("agent", "key-7", "planner", True, SEARCH + "2", None, None),
        ("agent", "key-7", "planner", True, SEARCH + "2", "req-42", None)]


def test_each_search_writes_one_row_with_the_count_it_answered(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer memories than the limit (its one statement checks every candidate), then a
    search whose first statement finds two live hits of four and whose second finds the
    other two: one row each, written by the statement that ends the search."""
    _set(world.runtime, world, {f"k{i}": f"lantern shelf {i} " + " ".join(["amber"] * (i % 3))
                                for i in range(20)})
    checked = _count_checked(monkeypatch)
    everything = _find(world.runtime, world.actor, "lantern amber shelf", 50)
    with world.runtime.sessions() as session:  # their vectors stay in the segment
        for place in [*range(0, 6), *range(10, 16)]:
            memories.delete_value(session, world.runtime.plane, world.actor,
                                  MemoryAddress.parse(Scope.agent, "a-1", everything[place]))
    with driver_statements(world.runtime.engine, monkeypatch) as seen:
        after = _find(world.runtime, world.actor, "lantern amber shelf", 4)

    assert len(everything) == 20
    assert checked == [20, search.first_check(4), 8]
    assert after == [everything[place] for place in (6, 7, 8, 9)]
    assert _counts(world) == [20, 4]
    # On PostgreSQL the second statement wrote the row: nothing else ran.
    assert seen == (["WITH", "WITH"] if world.runtime.engine.dialect.name == "postgresql"
                    else ["SELECT", "SELECT"])


def test_a_candidate_overwritten_since_its_vector_is_not_counted(
        world: ServiceWorld) -> None:
    """Its pointer is live, at a version its segment has no vector for (not indexed yet):
    not a hit, and not in the count."""
    _set(world.runtime, world, FACTS)
    _find(world.runtime, world.actor, "dog", 4)
    _set(world.runtime, world, {"job": "works day shifts as a nurse"}, index=False)
    keys = _find(world.runtime, world.actor, "nurse hospital dog peanuts canal", 4)

    assert sorted(keys) == ["food", "home", "pet"]
    assert _counts(world) == [4, 3]


def test_a_stale_kept_state_ranks_again_and_still_writes_one_row(
        world: ServiceWorld, other: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another server adds a segment after this one kept the scope's state: the first live
    statement reads the new tokens (and writes no row), the second one counts."""
    _set(world.runtime, world, FACTS)
    _find(world.runtime, world.actor, "dog", 2)  # reads and keeps the state
    _set(other, world, {"boat": "sails a small boat called heron on the canal"})
    checked = _count_checked(monkeypatch)
    keys = _find(world.runtime, world.actor, "boat heron canal", 2)

    assert keys[0] == "boat"
    assert checked == [4, 5]  # the kept state's four candidates, then the new state's five
    assert _counts(world) == [2, 2]


def test_a_search_with_no_candidate_writes_one_row_of_none(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    _set(world.runtime, world, FACTS)
    _find(world.runtime, world.actor, "dog", 3)
    monkeypatch.setattr(search.Segment, "scores",
                        lambda segment, query, nonzero: np.full(len(segment), np.nan))

    assert _find(world.runtime, world.actor, "zeppelin", 3) == []
    assert _counts(world) == [3, 0]


def test_a_filtered_search_and_one_serving_values_are_audited_once_too(
        world: ServiceWorld) -> None:
    _set(world.runtime, world, FACTS)
    with world.runtime.sessions() as session:
        filtered = search.search(session, world.runtime, world.actor, SearchIn(
            query="dog nurse", scope=Scope.agent, scope_ref="a-1", memory_type="agent_memory",
            limit=3, include_values=False))
        valued = search.search(session, world.runtime, world.actor, SearchIn(
            query="dog nurse", scope=Scope.agent, scope_ref="a-1", limit=2))
        reads = session.execute(select(AccessLog.pointer_id).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "read")).all()
    details = [r.detail for r in _rows(world)]

    assert len(filtered.hits) == 3 and len(valued.hits) == 2
    assert details == ["scope=agent ref=(given) user=None type=agent_memory tags=0 -> 3",
                       SEARCH + "2"]
    assert sorted(uuid.UUID(str(r.pointer_id)) for r in reads) == sorted(
        h.pointer_id for h in valued.hits)


def test_a_search_of_every_scope_the_key_sees_audits_itself_once(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """No scope named: the statement's tokens cover the segments of every scope searched."""
    _set(world.runtime, world, FACTS)
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.user, "u-9", "boat"),
                           "sails a small boat called heron", MemoryMeta())
        indexer.drain(session, world.runtime.plane, world.runtime, world.runtime.search_cache)

    def everywhere(query: str) -> list[str]:
        with world.runtime.sessions() as session:
            return [h.key or "" for h in search.search(session, world.runtime, world.actor,
                                                       SearchIn(query=query, limit=3,
                                                                include_values=False)).hits]

    everywhere("dog")  # reads and keeps the state
    with driver_statements(world.runtime.engine, monkeypatch) as seen:
        keys = everywhere("boat heron nurse")
    with world.runtime.sessions() as session:
        details = session.execute(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "search")
            .order_by(AccessLog.id)).scalars().all()

    assert keys[0] == "boat" and len(keys) == 3
    assert seen == (["WITH"] if world.runtime.engine.dialect.name == "postgresql"
                    else ["SELECT"])
    assert details == ["scope=None ref=None user=None type=None tags=0 -> 3"] * 2
