"""The search index at the service level, on SQLite and PostgreSQL: deltas compacted into a
snapshot, cold searches bounded in object reads (counted by the adapter's RequestStats),
warm searches touching no bucket, the background indexer, orphan GC keeping live vectors and
segments, and vectors of another embedder never compared."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer, SearchSegment
from control_plane.embedders.hashing import HashingEmbedder
from control_plane.integrity import reconcile
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.search import embedding, indexer, segment_writing
from control_plane.search import service as search
from control_plane.search.schemas import SearchIn
from tests.support.service import ServiceWorld

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"]


def _text(i: int) -> str:
    return f"note {i}: {WORDS[i % 18]} {WORDS[(i * 7) % 18]} item{i}"


def _write(world: ServiceWorld, n: int, scope: str = "agent", ref: str = "a-1") -> None:
    with world.runtime.sessions() as session:
        for i in range(n):
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope(scope), ref, f"k{i}"), _text(i),
                               MemoryMeta())


def _drain(world: ServiceWorld, **options: Any) -> embedding.RoundReport:
    with world.runtime.sessions() as session:
        return indexer.drain(session, world.runtime.plane, world.runtime,
                             world.runtime.search_cache, **options)


def _segments(world: ServiceWorld) -> list[tuple[str, int]]:
    with world.runtime.sessions() as session:
        return [(s.kind, s.rows) for s in session.scalars(
            select(SearchSegment).where(SearchSegment.tenant_id == world.tenant_id)
            .order_by(SearchSegment.created_at, SearchSegment.id))]


def _search(world: ServiceWorld, query: str, **body: Any) -> search.SearchResults:
    with world.runtime.sessions() as session:
        return search.search(session, world.runtime, world.actor,
                             SearchIn(query=query, **body))


def _gets(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        adapter = world.runtime.plane.active(session, world.tenant_id).adapter
    return int(adapter.stats.counts.get("get", 0))


@pytest.mark.slow
def test_deltas_compact_into_a_snapshot_and_cold_reads_are_bounded(world: ServiceWorld) -> None:
    _drain(world)  # what earlier tests on this database left unindexed
    _write(world, 300)
    report = _drain(world, batch=64, compact_after=3)
    segments = _segments(world)
    world.runtime.search_cache.clear()
    before = _gets(world)
    cold = _search(world, "item123", scope="agent", scope_ref="a-1", include_values=False)
    cold_reads = _gets(world) - before
    warm = _search(world, "item123", scope="agent", scope_ref="a-1", include_values=False)
    warm_reads = _gets(world) - before - cold_reads
    valued = _search(world, "item123", scope="agent", scope_ref="a-1", limit=3)
    value_reads = _gets(world) - before - cold_reads - warm_reads
    again = _search(world, "item123", scope="agent", scope_ref="a-1", limit=3)
    again_reads = _gets(world) - before - cold_reads - warm_reads - value_reads

    assert (report.embedded, report.deltas, report.compacted) == (300, 5, 1)
    assert segments == [("snapshot", 192), ("delta", 64), ("delta", 44)]
    assert cold_reads == 3  # one per segment
    assert warm_reads == 0
    assert (value_reads, again_reads) == (3, 0)  # values verified once, then cached by hash
    assert cold.hits[0].key == "k123" and cold.hits[0].value is None
    assert [h.pointer_id for h in warm.hits] == [h.pointer_id for h in cold.hits]
    assert valued.hits[0].value == _text(123)
    assert [h.value for h in again.hits] == [h.value for h in valued.hits]


def test_a_compaction_keeps_only_live_versions(world: ServiceWorld) -> None:
    _write(world, 10)
    _drain(world)
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor,
                              MemoryAddress.parse(Scope.agent, "a-1", "k3"))
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.agent, "a-1", "k4"), "replaced text",
                           MemoryMeta())
    _drain(world)
    with world.runtime.sessions() as session:
        assert segment_writing.compact_scope(session, world.runtime.plane,
                                             world.runtime.search_cache, world.tenant_id,
                                             "agent", "a-1", HashingEmbedder.name)
    found = _search(world, "replaced text", scope="agent", scope_ref="a-1", limit=20)

    assert _segments(world) == [("snapshot", 9)]
    assert found.hits[0].key == "k4"
    assert sorted(h.key or "" for h in found.hits) == sorted(
        f"k{i}" for i in range(10) if i != 3)


def test_the_background_indexer_embeds_after_the_write(world: ServiceWorld) -> None:
    _drain(world)  # what earlier tests on this database left unindexed
    _write(world, 3, ref="bg")
    with world.runtime.sessions() as session:
        waiting = session.scalars(select(MemoryPointer.has_embeddings).where(
            MemoryPointer.tenant_id == world.tenant_id)).all()
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache)
    first = worker.run_once()
    second = worker.run_once()
    found = _search(world, "item1", scope="agent", scope_ref="bg")
    assert waiting == [False, False, False]
    assert (first, second) == (True, False)
    assert found.hits[0].key == "k1"


def test_the_indexer_thread_runs_until_stopped(world: ServiceWorld) -> None:
    _write(world, 2, ref="thread")
    stop = threading.Event()
    rounds = threading.Semaphore(0)
    worker = indexer.Indexer(world.runtime.sessions, world.runtime.plane, world.runtime,
                             world.runtime.search_cache, interval=0.01)
    run_once = worker.run_once

    def counted() -> bool:
        busy = run_once()
        if not busy:
            rounds.release()  # an idle round: everything written so far is indexed
        return busy

    worker.run_once = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=worker.run_forever, args=(stop,))
    thread.start()
    try:
        assert rounds.acquire(timeout=60)
    finally:
        stop.set()
        thread.join(timeout=30)
    with world.runtime.sessions() as session:
        ready = session.scalars(select(MemoryPointer.has_embeddings).where(
            MemoryPointer.tenant_id == world.tenant_id)).all()
    assert ready == [True, True]
    assert not thread.is_alive()


def test_orphan_gc_keeps_live_vectors_and_segments_and_removes_stale_ones(
        world: ServiceWorld) -> None:
    _write(world, 4, ref="gc")
    _drain(world)
    with world.runtime.sessions() as session:
        old = session.scalar(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "k0"))
        assert old is not None
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.agent, "gc", "k0"), "new", MemoryMeta())
    stale = old.embedding_storage_path
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
        reconcile.collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                  tenant_id=world.tenant_id)
        left = {i.path for i in target.adapter.list(target.path("memories") + "/")}
        live = session.execute(select(MemoryPointer.key, MemoryPointer.embedding_storage_path)
                               .where(MemoryPointer.tenant_id == world.tenant_id)).all()
        segs = session.scalars(select(SearchSegment.storage_path).where(
            SearchSegment.tenant_id == world.tenant_id)).all()
    assert stale not in left
    assert {p for k, p in live if k != "k0"} <= left
    assert set(segs) <= left and len(segs) == 1


class _OtherEmbedder:
    name = "other-embedder-v1"
    dim = 8

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


@pytest.fixture
def other_embedder(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for module in (embedding, segment_writing, indexer, search):
        monkeypatch.setattr(module, "embedder_for", lambda *_: _OtherEmbedder())
    yield


def test_vectors_of_another_embedder_are_never_compared(world: ServiceWorld,
                                                        request: pytest.FixtureRequest) -> None:
    _write(world, 3, ref="model")
    _drain(world)
    request.getfixturevalue("other_embedder")
    switched = _search(world, "item1", scope="agent", scope_ref="model")
    with world.runtime.sessions() as session:
        queued = session.scalars(select(MemoryPointer.has_embeddings).where(
            MemoryPointer.tenant_id == world.tenant_id)).all()
    _drain(world)
    again = _search(world, "item1", scope="agent", scope_ref="model")
    with world.runtime.sessions() as session:
        models = set(session.scalars(select(MemoryPointer.embedding_model).where(
            MemoryPointer.tenant_id == world.tenant_id)))
    assert (switched.embedder, switched.hits) == ("other-embedder-v1", [])
    assert queued == [False, False, False]
    assert models == {"other-embedder-v1"}
    assert again.hits[0].key == "k1"  # the keyword ranking still finds it
    assert len(again.hits) == 3


def test_unknown_pointer_ids_are_no_results(world: ServiceWorld) -> None:
    assert _search(world, "nothing here").hits == []
    assert uuid.UUID(int=0) not in {h.pointer_id for h in _search(world, "x").hits}


def test_tiered_compaction_keeps_segments_bounded_and_rows_whole(world: ServiceWorld) -> None:
    _drain(world)  # what earlier tests on this database left unindexed
    _write(world, 200, ref="tiers")
    report = _drain(world, batch=10, compact_after=3)
    segments = _segments(world)
    found = _search(world, "item137", scope="agent", scope_ref="tiers", limit=1,
                    include_values=False)
    assert report.embedded == 200 and report.deltas == 20
    assert len([s for s in segments if s[0] == "delta"]) < 3
    assert len([s for s in segments if s[0] == "snapshot"]) == 1
    assert sum(rows for _, rows in segments) == 200  # each live row once
    assert found.hits[0].key == "k137"


def _broken_tenant(world: ServiceWorld) -> uuid.UUID:
    """A tenant whose stored bucket credentials no longer decrypt (a server key changed, a
    config restored from elsewhere), with 3 pointers waiting for vectors, older than any
    other: they come first in every batch."""
    from datetime import timedelta

    from control_plane.db.base import new_id, utcnow
    from control_plane.db.models import StorageConfig
    from control_plane.tenants.service import create_tenant

    with world.runtime.sessions() as session:
        broken, _ = create_tenant(session, f"broken-{uuid.uuid4().hex[:6]}")
        config = StorageConfig(id=new_id(), tenant_id=broken.id, storage_type="s3",
                               bucket="elsewhere", prefix="p",
                               credentials_encrypted=b"not sealed with this server's key",
                               is_active=True)
        session.add(config)
        session.flush()
        stale = utcnow() - timedelta(days=1)
        for i in range(3):
            session.add(MemoryPointer(
                id=new_id(), tenant_id=broken.id, scope_type="agent", scope_ref="x",
                key=f"k{i}", memory_type="fact", tags=[], storage_config_id=config.id,
                storage_path=f"memories/agent/x/k{i}/v.json", content_sha256="0" * 64,
                content_size=1, sync_status="synced", version=1, has_embeddings=False,
                created_at=stale, updated_at=stale))
        session.commit()
        return broken.id


def _drop_pointers(world: ServiceWorld, tenant_id: uuid.UUID) -> None:
    with world.runtime.sessions() as session:
        session.execute(MemoryPointer.__table__.delete().where(
            MemoryPointer.tenant_id == tenant_id))
        session.commit()


def test_a_tenant_whose_bucket_fails_never_holds_up_the_others(world: ServiceWorld) -> None:
    """A tenant whose bucket fails is skipped for the pass; every other tenant is indexed."""
    _drain(world)  # what earlier tests on this database left unindexed
    broken_id = _broken_tenant(world)
    try:
        _write(world, 2, ref="healthy")
        report = _drain(world, batch=2)
        assert report.failed_tenants == 1
        assert report.embedded >= 2
        with world.runtime.sessions() as session:
            ready = {(p.scope_ref, p.key): p.has_embeddings for p in session.scalars(
                select(MemoryPointer).where(
                    MemoryPointer.tenant_id.in_([world.tenant_id, broken_id]),
                    MemoryPointer.scope_ref.in_(["healthy", "x"])))}
        assert ready == {("healthy", "k0"): True, ("healthy", "k1"): True,
                         ("x", "k0"): False, ("x", "k1"): False, ("x", "k2"): False}
    finally:
        _drop_pointers(world, broken_id)


def test_vectors_are_recorded_only_for_pointers_still_at_their_content(
        world: ServiceWorld) -> None:
    """``mark_vectors`` (one statement on PostgreSQL, an executemany on SQLite) records a
    vector for a pointer still synced at the version and content it was made from, and for
    no other: not one overwritten meanwhile, not one being deleted."""
    from control_plane.db.models import VECTOR_SUFFIX
    from control_plane.search import index_rows

    _write(world, 3, ref="marks")
    with world.runtime.sessions() as session:
        before = {p.key: (p.id, p.version, p.storage_path) for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id,
                                        MemoryPointer.scope_ref == "marks"))}
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.agent, "marks", "k1"), "rewritten",
                           MemoryMeta())
        session.execute(MemoryPointer.__table__.update()
                        .where(MemoryPointer.id == before["k2"][0])
                        .values(sync_status="pending_delete"))
        session.commit()
        marked = index_rows.mark_vectors(session, [before[k] for k in ("k0", "k1", "k2")],
                                         "model-x")
        session.commit()
        after = {p.key: (p.has_embeddings, p.embedding_model, p.embedding_storage_path)
                 for p in session.scalars(
                     select(MemoryPointer).execution_options(populate_existing=True)
                     .where(MemoryPointer.tenant_id == world.tenant_id,
                            MemoryPointer.scope_ref == "marks"))}

    assert marked == {(before["k0"][0], before["k0"][1])}
    assert after["k0"] == (True, "model-x", before["k0"][2] + VECTOR_SUFFIX)
    assert after["k1"][1] != "model-x"
    assert after["k2"][1] != "model-x"


def test_a_pointer_deleted_after_the_round_read_it_is_skipped_and_the_rest_embedded(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """An erasure or delete that removes a pointer between the indexer's read of the
    pointers waiting for vectors and their embedding (forced here: the row goes right after
    that read) leaves the round to embed the others; the gone one is not recorded. The
    round's first tenant fails (its bucket), and the rollback that follows must not make
    the round read its other pointers again, the gone one included."""
    from control_plane.search import index_rows

    _drain(world)
    broken_id = _broken_tenant(world)
    _write(world, 4, ref="race")
    with world.runtime.sessions() as session:
        ids = {p.key: p.id for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id,
                                        MemoryPointer.scope_ref == "race"))}
    read = index_rows.needing_vectors
    deleted: list[uuid.UUID] = []

    def read_then_delete(session: Any, *args: Any, **kwargs: Any) -> Sequence[MemoryPointer]:
        found = read(session, *args, **kwargs)
        if not deleted and any(p.id == ids["k2"] for p in found):
            with world.runtime.sessions() as other:
                other.execute(MemoryPointer.__table__.delete()
                              .where(MemoryPointer.id == ids["k2"]))
                other.commit()
            deleted.append(ids["k2"])
        return found

    monkeypatch.setattr(index_rows, "needing_vectors", read_then_delete)
    try:
        report = _drain(world)
    finally:
        _drop_pointers(world, broken_id)
    with world.runtime.sessions() as session:
        embedded = {p.key: p.has_embeddings for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id,
                                        MemoryPointer.scope_ref == "race"))}

    assert deleted == [ids["k2"]]
    assert embedded == {"k0": True, "k1": True, "k3": True}
    assert (report.embedded, report.skipped, report.failed_tenants) == (3, 1, 1)


def test_a_tenant_whose_subject_key_its_kek_refuses_never_holds_up_the_others(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subject key its KEK refuses (``WrongKey``: damaged in the database, restored from
    elsewhere) when the round writes the tenant's segment: that tenant is skipped for the
    pass like one whose bucket fails, and every other tenant is indexed. (A round used to
    fail whole on it, every round again, so no tenant was indexed any more.)"""
    from control_plane.identity import Actor
    from control_plane.keys import subject_keys
    from control_plane.plane.kek_providers import WrongKey
    from control_plane.tenants.service import create_tenant

    _drain(world)
    with world.runtime.sessions() as session:
        damaged, _ = create_tenant(session, f"damaged-{uuid.uuid4().hex[:6]}")
        memories.set_value(session, world.runtime.plane, Actor(damaged.id, "api", "test"),
                           MemoryAddress.parse(Scope.user, "u-damaged", "k"), "a note",
                           MemoryMeta())
    key_for_write = subject_keys.key_for_write

    def refused_for_damaged(session: Any, ring: Any, tenant_id: uuid.UUID,
                            subject: Any) -> Any:
        if tenant_id == damaged.id:
            raise WrongKey("a subject key did not unwrap with its KEK")
        return key_for_write(session, ring, tenant_id, subject)

    monkeypatch.setattr(subject_keys, "key_for_write", refused_for_damaged)
    try:
        _write(world, 2, ref="beside-damaged")
        report = _drain(world)
        with world.runtime.sessions() as session:
            ready = {(p.scope_ref, p.key): p.has_embeddings for p in session.scalars(
                select(MemoryPointer).where(
                    MemoryPointer.tenant_id.in_([world.tenant_id, damaged.id]),
                    MemoryPointer.scope_ref.in_(["beside-damaged", "u-damaged"])))}
    finally:
        _drop_pointers(world, damaged.id)

    assert report.failed_tenants == 1
    assert ready == {("beside-damaged", "k0"): True, ("beside-damaged", "k1"): True,
                     ("u-damaged", "k"): False}
