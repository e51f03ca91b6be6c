"""A server process's helping indexer beside the background process's: it works only while
requests are quiet, from the backlog's newest end, compacts nothing, and never takes what
another indexer holds — on a SQLite file, whose indexers claim through byte-range locks on a
file beside the database, held by the process (time injected, no sleeps)."""

from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from sqlalchemy import func, select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer, SearchSegment
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.search import index_rows, indexer
from control_plane.search.claims import FileClaims
from control_plane.search.foreground import ServerActivity
from control_plane.search.segment_writing import COMPACT_AFTER
from tests.support.service import ServiceWorld, own_runtime


@pytest.fixture(scope="module")
def service_runtime(database: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """A database of this module's own (an indexer round takes every tenant's waiting
    pointers)."""
    yield from own_runtime(database, request, tmp_path_factory, "helping")


def _write(world: ServiceWorld, n: int, ref: str, first: int = 0) -> list[uuid.UUID]:
    """``n`` new memories in agent scope ``ref`` (keys from ``k{first}``); their pointer ids,
    oldest first."""
    keys = [f"k{first + i}" for i in range(n)]
    with world.runtime.sessions() as session:
        for key in keys:
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.agent, ref, key),
                               f"note {key} about {ref}", MemoryMeta())
        return list(session.scalars(select(MemoryPointer.id).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.scope_ref == ref,
            MemoryPointer.key.in_(keys)).order_by(MemoryPointer.updated_at)))


def _drain(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        indexer.drain(session, world.runtime.plane, world.runtime, world.runtime.search_cache)


def _waiting(world: ServiceWorld, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    with world.runtime.sessions() as session:
        return set(session.scalars(select(MemoryPointer.id).where(
            MemoryPointer.id.in_(ids), index_rows.wants_vector())))


class _Shared:
    """The server's requests' clock (a ``SharedClock``): when they last used the database."""

    def __init__(self) -> None:
        self.value = float("-inf")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _helper(world: ServiceWorld, shared: _Shared, clock: _Clock) -> indexer.Indexer:
    return indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                           world.runtime.search_cache, yield_ms=50, max_lag=2.0,
                           monotonic=clock, activity=ServerActivity(shared, clock),
                           helping=True)


def test_a_helping_indexer_works_only_while_requests_are_quiet(world: ServiceWorld) -> None:
    _drain(world)
    shared, clock = _Shared(), _Clock()
    helper = _helper(world, shared, clock)
    try:
        ids = _write(world, 3, "quiet")
        shared.value = clock.now  # a request just used the database
        busy = helper.should_wait()
        clock.now += 10.0  # requests keep coming far past the lag bound
        shared.value = clock.now - 0.01
        still_busy = helper.should_wait()
        catching_up = helper.catching_up
        clock.now += 0.05
        quiet = helper.should_wait()
        took = helper.run_once()
    finally:
        helper.close()
    assert busy == pytest.approx(0.05)
    assert (still_busy, catching_up) == (pytest.approx(0.04), False)  # it never catches up
    assert quiet == 0.0
    assert took is True
    assert _waiting(world, ids) == set()


def test_a_helping_indexer_takes_the_newest_and_leaves_compaction(
        world: ServiceWorld) -> None:
    _drain(world)
    shared, clock = _Shared(), _Clock()
    helper = _helper(world, shared, clock)
    ref = f"newest-{uuid.uuid4().hex[:8]}"
    try:
        oldest = _write(world, indexer.BATCH + 5, ref)
        helper.run_once()  # one round: a batch, from the newest end
        left = _waiting(world, oldest)
        newer: list[uuid.UUID] = []
        for i in range(COMPACT_AFTER):  # more deltas than a compaction waits for
            newer += _write(world, 2, ref, first=1000 + 2 * i)
            helper.run_once()
    finally:
        helper.close()
    with world.runtime.sessions() as session:
        kinds: dict[str, int] = dict(session.execute(
            select(SearchSegment.kind, func.count()).where(
                SearchSegment.tenant_id == world.tenant_id, SearchSegment.scope_ref == ref)
            .group_by(SearchSegment.kind)).all())
    _write(world, 1, ref, first=2000)
    _drain(world)  # the background process's indexer: it compacts
    with world.runtime.sessions() as session:
        after: dict[str, int] = dict(session.execute(
            select(SearchSegment.kind, func.count()).where(
                SearchSegment.tenant_id == world.tenant_id, SearchSegment.scope_ref == ref)
            .group_by(SearchSegment.kind)).all())
    assert left == set(oldest[:5])  # the five oldest wait for the other indexer
    assert _waiting(world, newer) == set()
    assert kinds == {"delta": 1 + COMPACT_AFTER}
    assert after == {"snapshot": 1}


def _hold_in_child(path: str, ids: list[str], limit: int, tell: Connection,
                   done: Connection) -> None:
    """Another process's indexer: holds ``limit`` of ``ids``, says which, and keeps them
    until told (or until it dies)."""
    claims = FileClaims(Path(path))
    held = claims.hold([uuid.UUID(i) for i in ids], limit)
    tell.send([str(i) for i in held])
    done.recv()
    claims.close()


@pytest.mark.databases("sqlite")
def test_file_claims_skip_what_another_process_holds_until_it_ends(
        world: ServiceWorld, tmp_path: Path) -> None:
    _drain(world)
    ids = _write(world, 10, "claims")
    path = tmp_path / "memplane.db.index-claims"
    context = multiprocessing.get_context("spawn")
    tell_reader, tell_writer = context.Pipe(duplex=False)
    done_reader, done_writer = context.Pipe(duplex=False)
    child = context.Process(target=_hold_in_child,
                            args=(str(path), [str(i) for i in ids], 4, tell_writer,
                                  done_reader))
    child.start()
    mine = FileClaims(path)
    try:
        theirs = {uuid.UUID(i) for i in tell_reader.recv()}
        with world.runtime.sessions() as session:
            candidates = index_rows.needing_vector_ids(session, None, 100)
            got = mine.take(session, candidates, 100)
        mine.release()
        with world.runtime.sessions() as session:
            report = indexer.index_round(session, world.runtime.plane, world.runtime,
                                         world.runtime.search_cache, claims=mine)
        left = _waiting(world, ids)
        done_writer.send(True)  # the other indexer ends, and its locks go with it
        child.join(timeout=30)
        with world.runtime.sessions() as session:
            again = mine.take(session, index_rows.needing_vector_ids(session, None, 100), 100)
    finally:
        mine.close()
        if child.is_alive():
            child.kill()
    assert len(theirs) == 4 and theirs < set(ids)
    assert {p.id for p in got} == set(ids) - theirs
    assert report.embedded == 6
    assert left == theirs
    assert {p.id for p in again} == theirs
