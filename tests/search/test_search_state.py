"""What a warm search keeps of the control plane between searches (the tenant's embedder,
retention policies and the scope's segment rows), on SQLite and PostgreSQL: a change made
through another runtime on the same database — another server process — is seen by the
very next search of this one, and the search itself still runs one live-filter statement
and writes its audit row."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event, select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.embedders import service as embedders
from control_plane.embedders.schemas import EmbedderConfigIn
from control_plane.errors import Conflict
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.retention import policies
from control_plane.retention.schemas import PolicyIn
from control_plane.runtime import Runtime
from control_plane.search import indexer
from control_plane.search import repository as repo
from control_plane.search import service as search
from control_plane.search.schemas import SearchIn
from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import ServiceWorld

FACTS = {"pet": "the dog is called biscuit and fears thunder",
         "job": "works night shifts as a nurse at the hospital",
         "food": "allergic to peanuts and loves thai curry"}


def _write(runtime: Runtime, world: ServiceWorld, facts: dict[str, str],
           ref: str = "a-1") -> None:
    with runtime.sessions() as session:
        for key, text in facts.items():
            memories.set_value(session, runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.agent, ref, key), text, MemoryMeta())
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)


def _search(runtime: Runtime, world: ServiceWorld, query: str,
            ref: str = "a-1") -> search.SearchResults:
    with runtime.sessions() as session:
        return search.search(session, runtime, world.actor,
                             SearchIn(query=query, scope=Scope.agent, scope_ref=ref, limit=5))


def _keys(found: search.SearchResults) -> list[str]:
    return sorted(h.key or "" for h in found.hits)


def _kept(runtime: Runtime, world: ServiceWorld, ref: str = "a-1") -> Any:
    return runtime.search_cache.state((world.tenant_id, "agent", ref, None))


def test_a_new_retention_policy_hides_at_once_in_another_runtime(
        world: ServiceWorld, other: Runtime) -> None:
    _write(world.runtime, world, FACTS)
    before = _search(other, world, "dog biscuit nurse peanuts")
    kept = _kept(other, world)
    with world.runtime.sessions() as session:  # "pet" was last written 40 days ago
        session.execute(update(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "pet")
            .values(updated_at=utcnow() - timedelta(days=40)))
        session.commit()
    aged = _search(other, world, "dog biscuit nurse peanuts")
    with world.runtime.sessions() as session:  # through the first runtime
        policies.put_policy(session, world.actor, PolicyIn(
            scope=Scope.agent, retention_days=30, auto_delete=True))
    after = _search(other, world, "dog biscuit nurse peanuts")
    with world.runtime.sessions() as session:  # the policy stops deleting: seen again
        policies.put_policy(session, world.actor, PolicyIn(
            scope=Scope.agent, retention_days=30, auto_delete=False))
    relaxed = _search(other, world, "dog biscuit nurse peanuts")

    assert kept is not None and kept.policies == []
    assert _keys(before) == _keys(aged) == ["food", "job", "pet"]
    assert _keys(after) == ["food", "job"]
    assert _kept(other, world).policies[0].retention_days == 30
    assert _keys(relaxed) == ["food", "job", "pet"]


def test_new_segments_and_deletes_of_another_runtime_show_at_once(
        world: ServiceWorld, other: Runtime) -> None:
    _write(world.runtime, world, FACTS)
    before = _search(other, world, "dog biscuit thunder kayak")
    kept = _kept(other, world)
    _write(world.runtime, world, {"boat": "paddles a red kayak on the lake"})
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor,
                        MemoryAddress.parse(Scope.agent, "a-1", "pet"))
    after = _search(other, world, "dog biscuit thunder kayak")

    assert "pet" in _keys(before) and "boat" not in _keys(before)
    assert len(kept.rows) == 1
    assert "boat" in _keys(after) and "pet" not in _keys(after)
    assert len(_kept(other, world).rows) == 2  # the new delta was read


@pytest.fixture
def embed_server() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.default = llm.embeddings(dim=16)
        yield server


def test_an_embedder_configured_through_another_runtime_is_used_by_the_next_search(
        world: ServiceWorld, other: Runtime, embed_server: FakeLLM) -> None:
    _write(world.runtime, world, FACTS)
    before = _search(other, world, "dog biscuit")
    with world.runtime.sessions() as session:
        embedders.configure(session, world.runtime, world.actor, EmbedderConfigIn(
            base_url=embed_server.base_url, model="fake-embed", timeout_seconds=5,
            max_retries=0))
    configured = _search(other, world, "dog biscuit")
    with world.runtime.sessions() as session:
        queued = session.scalars(select(MemoryPointer.has_embeddings).where(
            MemoryPointer.tenant_id == world.tenant_id)).all()
        embedders.delete_config(session, world.runtime, world.actor)
        # the vectors made again with the server's default, as after any change back
        indexer.drain(session, world.runtime.plane, world.runtime, world.runtime.search_cache)
    removed = _search(other, world, "dog biscuit")

    assert (before.embedder, before.hits[0].key) == ("memplane-hash-v2", "pet")
    assert (configured.embedder, configured.hits) == ("openai:fake-embed", [])
    assert queued == [False, False, False]  # another model's vectors: queued again
    assert (removed.embedder, removed.hits[0].key) == ("memplane-hash-v2", "pet")


@contextmanager
def driver_statements(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The first word of every statement the database driver runs meanwhile in this thread
    (other tests' servers in this process have threads of their own), on any connection:
    also those run straight on a driver connection, which SQLAlchemy's events do not see
    (SQLite's trace callback on ``engine``'s connections; psycopg's cursor, spied on)."""
    seen: list[str] = []
    mine = threading.get_ident()

    def note(statement: Any) -> None:
        text = statement.decode() if isinstance(statement, bytes) else str(statement)
        if threading.get_ident() == mine and not text.startswith("--"):  # "--": a trigger
            seen.append(text.split(None, 1)[0].upper())

    if engine.dialect.name == "sqlite":
        def trace(dbapi_conn: Any, *_: Any) -> None:
            dbapi_conn.set_trace_callback(note)

        def untrace(dbapi_conn: Any, *_: Any) -> None:
            dbapi_conn.set_trace_callback(None)

        event.listen(engine, "checkout", trace)
        event.listen(engine, "checkin", untrace)
        try:
            yield seen
        finally:
            event.remove(engine, "checkout", trace)
            event.remove(engine, "checkin", untrace)
        return
    import psycopg

    execute = psycopg.Cursor.execute

    def spied(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(query)
        return execute(cursor, query, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(psycopg.Cursor, "execute", spied)
        yield seen


def test_a_warm_search_runs_one_statement_and_audits_itself(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(world.runtime, world, FACTS)
    _search(world.runtime, world, "dog biscuit")  # reads and keeps the state
    with driver_statements(world.runtime.engine, monkeypatch) as seen:
        found = _search(world.runtime, world, "nurse hospital")
    with world.runtime.sessions() as session:
        rows = session.execute(select(AccessLog.operation, AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "search")
            .order_by(AccessLog.accessed_at, AccessLog.id)).all()

    assert found.hits[0].key == "job"
    # The live filter first, on its own (no BEGIN before it), then the audit row's commit.
    assert (seen[:1], seen.count("SELECT"), "INSERT" in seen) == (["SELECT"], 1, True)
    assert len(rows) == 2
    assert rows[-1].detail == (f"scope=agent ref=(given) user=None type=None tags=0 "
                               f"-> {len(found.hits)}")
    assert uuid.UUID(int=0) not in {h.pointer_id for h in found.hits}


# Each look another embedder or other policies (both in the live filter and the vectors):
# no attempt may rank on what it kept.
CHANGES = {
    "policies": lambda row: (None, frozenset({uuid.uuid4().hex}), frozenset({"s"})),
    "embedder": lambda row: (uuid.uuid4(), frozenset(), frozenset({"s"})),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_state_that_keeps_changing_answers_conflict_and_is_audited(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    _write(world.runtime, world, FACTS)
    monkeypatch.setattr(search, "_tokens", CHANGES[change])
    with pytest.raises(Conflict) as refused:
        _search(world.runtime, world, "dog biscuit")
    with world.runtime.sessions() as session:
        rows = session.execute(select(AccessLog.success, AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "search")).all()

    assert "kept changing" in refused.value.detail
    assert [(r.success, r.detail.endswith("conflict: the search index kept changing during "
                                          "the search; retry")) for r in rows] == [
        (False, True)]


@pytest.mark.parametrize("segments", ["added", "replaced"])
def test_segments_changing_during_every_attempt_answer_from_the_kept_state(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, segments: str) -> None:
    # An indexer committing a new segment of the tenant's, or a compaction merging them,
    # while each attempt ranks: the last attempt answers from what it kept (the newest
    # memories missing) rather than 409.
    _write(world.runtime, world, FACTS)
    looks: list[frozenset[str]] = []

    def growing(row: Any) -> tuple[Any, frozenset[str], frozenset[str]]:
        looks.append(frozenset(str(n) for n in range(len(looks) + 1)) if segments == "added"
                     else frozenset({uuid.uuid4().hex}))
        return (None, frozenset(), looks[-1])

    monkeypatch.setattr(search, "_tokens", growing)
    found = _search(world.runtime, world, "dog biscuit")
    with world.runtime.sessions() as session:
        rows = session.execute(select(AccessLog.success, AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "search")).all()

    assert found.hits[0].key == "pet"
    # three states read, each ranked and checked once: the third answered
    assert len(looks) == 6
    assert [(r.success, r.detail) for r in rows] == [
        (True, f"scope=agent ref=(given) user=None type=None tags=0 -> {len(found.hits)}")]


def test_a_scope_wide_policy_beside_a_typed_one_is_applied_by_the_search(
        world: ServiceWorld) -> None:
    """A policy for every type of a scope leaves out the types with a policy of their own
    (``memory_type NOT IN (...)`` in the live filter, a list expanded for the driver)."""
    _write(world.runtime, world, FACTS)
    with world.runtime.sessions() as session:  # "pet" was last written 40 days ago
        session.execute(update(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "pet")
            .values(updated_at=utcnow() - timedelta(days=40)))
        session.commit()
        policies.put_policy(session, world.actor, PolicyIn(
            scope=Scope.agent, memory_type="knowledge", retention_days=365, auto_delete=True))
        policies.put_policy(session, world.actor, PolicyIn(
            scope=Scope.agent, retention_days=30, auto_delete=True))
    hidden = _search(world.runtime, world, "dog biscuit nurse peanuts")
    with world.runtime.sessions() as session:  # "pet" becomes knowledge: its own 365 days
        session.execute(update(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "pet")
            .values(memory_type="knowledge"))
        session.commit()
    typed = _search(world.runtime, world, "dog biscuit nurse peanuts")

    assert _keys(hidden) == ["food", "job"]
    assert _keys(typed) == ["food", "job", "pet"]


def _count_checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many candidate ids each live statement checks from now on, in order."""
    checked: list[int] = []
    run = repo.LiveQuery.run

    def counted(query: Any, engine: Engine, parameters: dict[str, Any], *rest: Any) -> Any:
        ids = parameters["ids"]  # SQLite: a JSON array; PostgreSQL: an array's text
        checked.append(len(json.loads(ids)) if ids.startswith("[")
                       else len(ids.strip("{}").split(",")) if ids != "{}" else 0)
        return run(query, engine, parameters, *rest)

    monkeypatch.setattr(repo.LiveQuery, "run", counted)
    return checked


def test_the_live_filter_checks_the_best_candidates_first_and_more_only_if_too_few_live(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores come from the rankings alone, so deleting the best candidates (their vectors
    stay in the segment until a compaction) leaves every other score as it was: the search
    then answers the next ones, found by a second statement over the next candidates."""
    colours = ["red", "green", "blue", "amber", "violet", "grey"]
    _write(world.runtime, world, {f"k{i}": f"lantern {colours[i % 6]} {colours[i * 5 % 6]} "
                                           f"shelf {i}" for i in range(30)})
    checked = _count_checked(monkeypatch)

    def found(limit: int) -> list[tuple[str, float]]:
        with world.runtime.sessions() as session:
            hits = search.search(session, world.runtime, world.actor, SearchIn(
                query="lantern blue shelf", scope=Scope.agent, scope_ref="a-1", limit=limit,
                include_values=False)).hits
        return [(h.key or "", h.score) for h in hits]

    ranking = found(14)
    first = found(5)
    all_live = list(checked)
    with world.runtime.sessions() as session:
        for key, _ in ranking[:search.first_check(5)]:
            memories.delete_value(session, world.runtime.plane, world.actor,
                                  MemoryAddress.parse(Scope.agent, "a-1", key))
    checked.clear()
    after = found(5)

    assert len(ranking) == 14 and all_live == [search.first_check(14), search.first_check(5)]
    assert first == ranking[:5]
    # The 9 checked first are deleted: 10 more are checked, and the next five answer, with
    # the very scores they had while the others were live.
    assert checked == [search.first_check(5), 2 * 5]
    assert after == ranking[9:14]


def test_a_search_without_any_candidate_still_checks_the_kept_state(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedder answering NaN and a query of no known word leave no candidate: the
    statement still runs (with no id), so a stale kept state is still noticed."""
    _write(world.runtime, world, FACTS)
    _search(world.runtime, world, "dog biscuit")  # reads and keeps the state
    checked = _count_checked(monkeypatch)
    monkeypatch.setattr(search.Segment, "scores",
                        lambda segment, query, nonzero: np.full(len(segment), np.nan))
    found = _search(world.runtime, world, "zeppelin")

    assert found.hits == []
    assert checked == [0]
