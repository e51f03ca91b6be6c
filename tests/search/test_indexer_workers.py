"""Where the search indexer runs and how several share the work, on SQLite and PostgreSQL:
only processes that run jobs start it; indexers on PostgreSQL skip the pointers another one
holds (each vector put once); inside the server it waits while requests commit, within a
bounded lag (time injected, no sleeps)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import VECTOR_SUFFIX, MemoryPointer
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.search import foreground, index_rows, indexer
from control_plane.search.claims import Claims
from control_plane.search.embedding import RoundReport
from control_plane.settings import Settings
from storage_adapters import base as storage
from tests.support.service import ServiceWorld, isolated_database, make_settings


@pytest.fixture(scope="module")
def service_runtime(database: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """A database of this module's own: an indexer round takes every tenant's waiting
    pointers, so the shared database's other tenants (some with buckets that fail on
    purpose) would be in the rounds these tests count."""
    url = isolated_database(database, request)
    runtime = Runtime(make_settings(url, tmp_path_factory.mktemp("indexers")))
    if url == "sqlite":
        runtime.migrate()
    try:
        yield runtime
    finally:
        runtime.close()


def _write(world: ServiceWorld, n: int, ref: str) -> list[uuid.UUID]:
    with world.runtime.sessions() as session:
        for i in range(n):
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.agent, ref, f"k{i}"),
                               f"note {i} about {ref}", MemoryMeta())
        return list(session.scalars(select(MemoryPointer.id).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.scope_ref == ref)
            .order_by(MemoryPointer.updated_at)))


def _drain(world: ServiceWorld) -> RoundReport:
    with world.runtime.sessions() as session:
        return indexer.drain(session, world.runtime.plane, world.runtime,
                             world.runtime.search_cache)


def _ready(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, index_rows.vector_ready())) or 0)


@pytest.fixture
def vector_puts(world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every ``.vec`` object put, by path (the indexer puts through ``store._put``, or
    ``store.put_vectors`` into a bucket that stores many together)."""
    from control_plane.search import store

    puts: list[str] = []
    original, original_many = store._put, store.put_vectors

    def counted(target: storage.StorageAdapter | object, path: str, blob: bytes) -> None:
        if path.endswith(VECTOR_SUFFIX):
            puts.append(path)
        original(target, path, blob)  # type: ignore[arg-type]

    def counted_many(target: object, items: list[tuple[str, bytes]]) -> None:
        puts.extend(path for path, _ in items if path.endswith(VECTOR_SUFFIX))
        original_many(target, items)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_put", counted)
    monkeypatch.setattr(store, "put_vectors", counted_many)
    yield puts


@pytest.mark.databases("postgres")
def test_two_indexers_on_postgres_never_embed_the_same_pointer(
        world: ServiceWorld, vector_puts: list[str]) -> None:
    _drain(world)  # what earlier tests on this database left unindexed
    ids = _write(world, 10, "split")
    vector_puts.clear()
    first, second = Claims(world.runtime.engine), Claims(world.runtime.engine)
    with world.runtime.sessions() as session:
        candidates = index_rows.needing_vector_ids(session, None, 100)
        held = first.take(session, candidates, 4)  # indexer A holds four, mid-batch
    try:
        with world.runtime.sessions() as session:
            other = indexer.index_round(session, world.runtime.plane, world.runtime,
                                        world.runtime.search_cache, claims=second)
            others_puts = sorted(vector_puts)
            # A finishes its batch only now: the six B did are not in it.
            again = first.take(session, candidates, 100)
    finally:
        first.release()
    with world.runtime.sessions() as session:
        rest = indexer.index_round(session, world.runtime.plane, world.runtime,
                                   world.runtime.search_cache, claims=first)
        after = indexer.index_round(session, world.runtime.plane, world.runtime,
                                    world.runtime.search_cache, claims=second)

    assert len(held) == 4 and {p.id for p in held} < set(ids)
    assert other.embedded == 6
    assert len(others_puts) == 6
    assert {p.id for p in again} == {p.id for p in held}  # B's six no longer wait
    assert (rest.embedded, after.embedded) == (4, 0)
    assert len(vector_puts) == len(set(vector_puts)) == 10
    assert _ready(world) == 10


@pytest.mark.databases("postgres")
def test_a_claim_rechecks_what_another_indexer_finished(world: ServiceWorld) -> None:
    _drain(world)
    _write(world, 3, "late")
    claims = Claims(world.runtime.engine)
    with world.runtime.sessions() as session:
        candidates = index_rows.needing_vector_ids(session, None, 100)
    _drain(world)  # another indexer records them between the read and the lock
    try:
        with world.runtime.sessions() as session:
            got = claims.take(session, candidates, 100)
    finally:
        claims.release()
    assert len(candidates) == 3
    assert got == []


def test_indexer_threads_follow_the_jobs(tmp_path: Path) -> None:
    def threads(separate: bool = False, **overrides: Any) -> tuple[list[str], bool]:
        runtime = Runtime(Settings(data_dir=tmp_path / uuid.uuid4().hex,
                                   **overrides))
        runtime.migrate()
        try:
            runtime.start_background(separate_process=separate)
            return sorted(t.name for t in runtime._threads), runtime._background is not None
        finally:
            runtime.close()

    api_replica = threads(run_jobs=False)
    embedded = threads()
    unindexed = threads(embed_on_write=False)
    # ``memplane serve``: the sealer and the indexer in a process of their own; the job
    # worker and the indexer helping while requests are quiet, threads of the server.
    served = threads(separate=True)
    served_not_helping = threads(separate=True, index_when_idle=False)
    served_unindexed = threads(separate=True, embed_on_write=False)
    jobs = ["memplane-job-worker-0", "memplane-job-worker-1"]  # MEMPLANE_JOB_THREADS: 2
    assert api_replica == (["memplane-audit-sealer"], False)
    assert embedded == (["memplane-audit-sealer", *jobs, "memplane-search-indexer"], False)
    assert unindexed == (["memplane-audit-sealer", *jobs], False)
    assert served == ([*jobs, "memplane-search-helper"], True)
    assert served_not_helping == (jobs, True)
    assert served_unindexed == unindexed


def test_each_worker_of_a_host_helps_index_unless_it_runs_no_jobs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``memplane serve --workers N``: each worker publishes its requests' clock on the
    host's board, and runs the helping indexer that waits on it."""
    from control_plane.host_board import ENV, Board

    monkeypatch.setenv(ENV, str(Board.create(tmp_path / "board")))
    data_dir = tmp_path / "data"
    setup = Runtime(Settings(data_dir=data_dir))
    setup.migrate()
    setup.close()

    def threads(**overrides: Any) -> list[str]:
        runtime = Runtime(Settings(data_dir=data_dir, **overrides))
        try:
            runtime.publish_activity()
            return sorted(t.name for t in runtime._threads)
        finally:
            runtime.close()

    assert threads() == ["memplane-search-helper"]
    assert threads(run_jobs=False) == []
    assert threads(embed_on_write=False) == []
    assert threads(index_when_idle=False) == []


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_embedded_indexer_waits_for_requests_within_its_lag(world: ServiceWorld) -> None:
    _drain(world)
    clock = _Clock()
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache, yield_ms=50, max_lag=2.0,
                             monotonic=clock)
    try:
        quiet = worker.should_wait()
        _write(world, 3, "yield")  # a request's commits, in this (foreground) thread
        clock.now += 0.01
        busy = worker.should_wait()
        clock.now += 0.05
        after_quiet = worker.should_wait()
        clock.now += 2.0  # requests keep committing for longer than the lag allows
        _write(world, 2, "yield2")
        forced = worker.should_wait()
        catching_up = worker.catching_up
        first = worker.run_once()
        still = worker.catching_up
        second = worker.run_once()
        done = worker.catching_up
    finally:
        worker.close()
    assert quiet == 0.0
    assert busy == pytest.approx(0.04)
    assert after_quiet == 0.0
    assert (forced, catching_up) == (0.0, True)
    assert (first, still) == (True, False)  # that round took all that waited
    assert (second, done) == (False, False)
    assert _ready(world) == 5


def test_only_foreground_database_use_holds_the_indexer_back(world: ServiceWorld) -> None:
    clock = _Clock()
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache, yield_ms=50, max_lag=2.0,
                             monotonic=clock)

    def commit() -> None:
        with world.runtime.sessions() as session:
            session.execute(select(1))
            session.commit()

    try:
        background = threading.Thread(target=commit, name="memplane-audit-sealer")
        background.start()
        background.join()
        after_background = worker.should_wait()
        commit()
        after_foreground = worker.should_wait()
        clock.now += 1.0
        quiet_again = worker.should_wait()
        # The PostgreSQL hot path's single statements run on raw connections (db.direct).
        world.runtime.engine.raw_connection().close()
        after_raw = worker.should_wait()
    finally:
        worker.close()
    assert after_background == 0.0
    assert after_foreground == pytest.approx(0.05)
    assert quiet_again == 0.0
    assert after_raw == pytest.approx(0.05)


def test_only_a_server_that_indexes_runs_a_background_process(
        world: ServiceWorld) -> None:
    from control_plane.background import wanted

    engine = world.runtime.engine
    settings = world.runtime.settings.model_copy(update={
        "run_jobs": True, "embed_on_write": True, "background_process": True})
    answers = {
        "default": wanted(settings, engine),
        "api replica": wanted(settings.model_copy(update={"run_jobs": False}), engine),
        "no embedding": wanted(settings.model_copy(update={"embed_on_write": False}), engine),
        "turned off": wanted(settings.model_copy(update={"background_process": False}), engine),
    }
    # On both databases (a SQLite file's writers take turns across processes).
    assert answers == {"default": True, "api replica": False, "no embedding": False,
                       "turned off": False}


def test_a_background_process_that_keeps_failing_is_restarted_less_often() -> None:
    from control_plane.background import restart_delay

    assert [restart_delay(n) for n in range(8)] == [1.0, 1.0, 2.0, 5.0, 10.0, 30.0, 30.0,
                                                   30.0]


def test_an_indexer_beside_the_server_waits_for_the_servers_requests(
        world: ServiceWorld) -> None:
    """The server publishes when its requests last used the database on a clock shared with
    its background process (control_plane.background); the indexer there waits on it."""
    from control_plane.background import shared_clock

    clock = _Clock()
    shared = shared_clock()
    server = foreground.ForegroundActivity(world.runtime.engine, clock, shared=shared)
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache, yield_ms=50, max_lag=2.0,
                             monotonic=clock,
                             activity=foreground.ServerActivity(shared, clock))

    def commit() -> None:
        with world.runtime.sessions() as session:
            session.execute(select(1))
            session.commit()

    try:
        never = shared.value
        quiet = worker.should_wait()
        background = threading.Thread(target=commit, name="memplane-job-worker")
        background.start()
        background.join()
        after_background = shared.value
        clock.now += 0.5
        commit()
        published = shared.value
        clock.now += 0.02
        busy = worker.should_wait()
        clock.now += 0.05
        after_quiet = worker.should_wait()
    finally:
        worker.close()
        server.close()
    assert never == float("-inf")
    assert quiet == 0.0
    assert after_background == float("-inf")
    assert published == 1000.5
    assert busy == pytest.approx(0.03)
    assert after_quiet == 0.0


def test_the_background_process_reads_the_clock_the_server_publishes(
        world: ServiceWorld) -> None:
    from control_plane import background
    from tests.support.spawned import echo_clock

    shared = background.shared_clock()
    server = foreground.ForegroundActivity(world.runtime.engine, _Clock(), shared=shared)
    asked_reader, asked = background._CONTEXT.Pipe(duplex=False)
    answers, answer_writer = background._CONTEXT.Pipe(duplex=False)
    child = background._CONTEXT.Process(target=echo_clock,
                                        args=(shared, asked_reader, answer_writer))
    child.start()
    asked_reader.close()
    answer_writer.close()
    try:
        asked.send(None)
        before = answers.recv()
        with world.runtime.sessions() as session:  # a request's use of the database
            session.execute(select(1))
            session.commit()
        asked.send(None)
        after = answers.recv()
    finally:
        asked.close()
        child.join(timeout=30)
        server.close()
    assert before == float("-inf")
    assert after == 1000.0
    assert child.exitcode == 0


def test_the_indexer_verifies_each_object_it_reads(world: ServiceWorld,
                                                   vector_puts: list[str]) -> None:
    from control_plane.db.models import AccessLog

    _drain(world)
    _write(world, 3, "verify")
    with world.runtime.sessions() as session:
        found = {p.key: p for p in session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.scope_ref == "verify"))}
        adapter = world.runtime.plane.by_id(session, found["k0"].storage_config_id).adapter
    tampered = adapter.get(found["k0"].storage_path)
    adapter.delete_many([found["k0"].storage_path, found["k1"].storage_path])
    adapter.put(found["k0"].storage_path, tampered[:-3] + bytes(b ^ 1 for b in tampered[-3:]))
    vector_puts.clear()
    report = _drain(world)
    with world.runtime.sessions() as session:
        status = {p.key: (p.sync_status, p.has_embeddings) for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id,
                                        MemoryPointer.scope_ref == "verify"))}
        failures = sorted(session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "read",
            AccessLog.success.is_(False))))

    assert (report.embedded, report.corrupt) == (1, 2)
    assert status == {"k0": ("corrupt", False), "k1": ("corrupt", False),
                      "k2": ("synced", True)}
    assert [f.split(";")[0] for f in failures] == [
        "hash_mismatch (search indexer): object could not be decrypted",
        "hash_mismatch (search indexer): object is missing from the bucket"]
    assert vector_puts == [found["k2"].storage_path + VECTOR_SUFFIX]


def test_a_round_short_of_a_batch_lets_writes_gather(world: ServiceWorld) -> None:
    _drain(world)
    _write(world, indexer.BATCH + 3, "gather")
    # Beside a server's requests (yielding to them): rounds of BATCH.
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache, yield_ms=50)
    try:
        first = (worker.run_once(), worker.full)
        second = (worker.run_once(), worker.full)
        third = (worker.run_once(), worker.full)
    finally:
        worker.close()
    assert worker.batch == indexer.BATCH
    assert first == (True, True)  # a full batch: the next round follows at once
    assert second == (True, False)  # the rest: the loop waits its interval next
    assert third == (False, False)
    assert _ready(world) == indexer.BATCH + 3


def test_an_indexer_in_a_process_of_its_own_takes_larger_rounds(world: ServiceWorld) -> None:
    _drain(world)
    _write(world, indexer.BATCH + 3, "larger")
    # Flat out (``memplane worker``): no request waits for its rounds to end.
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache)
    try:
        first = (worker.run_once(), worker.full)
        second = (worker.run_once(), worker.full)
    finally:
        worker.close()
    assert worker.batch == indexer.CATCH_UP_BATCH
    assert first == (True, False)  # all BATCH + 3 in one round
    assert second == (False, False)
    assert _ready(world) == indexer.BATCH + 3


def test_a_vector_left_at_its_path_by_a_stopped_indexer_is_replaced(
        world: ServiceWorld) -> None:
    from control_plane.search import codec, store

    _drain(world)
    _write(world, 2, "leftover")
    with world.runtime.sessions() as session:
        found = {p.key: p for p in session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.scope_ref == "leftover"))}
        target = world.runtime.plane.by_id(session, found["k0"].storage_config_id)
    left = found["k0"].storage_path + VECTOR_SUFFIX
    target.adapter.put(left, b"a vector an indexer put before it stopped")
    assert isinstance(target.adapter, storage.BatchAdapter)  # the local bucket: put_many

    report = _drain(world)
    with world.runtime.sessions() as session:
        ready = {p.key: p.embedding_storage_path for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id,
                                        MemoryPointer.scope_ref == "leftover"))}
        rows = store.read_vector(session, world.runtime.plane, target, world.tenant_id,
                                 found["k0"].id, left)

    assert report.embedded == 2
    assert ready == {"k0": left, "k1": found["k1"].storage_path + VECTOR_SUFFIX}
    assert (rows.ids, rows.versions, rows.texts) == (
        [found["k0"].id], [1], ["note 0 about leftover"])
    assert isinstance(rows, codec.Rows)
