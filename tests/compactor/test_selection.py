"""Which buckets a run takes: at least ``min_events`` uncompressed events older than
``older_than_days`` per (scope, scope ref), per tenant — one query on the partial index."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from control_plane.audit.service import Actor
from control_plane.compactor import repository as repo
from control_plane.compactor import service as compactor
from control_plane.db.base import utcnow
from control_plane.db.models import CompactorSettings, MemoryEvent
from control_plane.runtime import Runtime

from .helpers import new_tenant, own_runtime, raw_events


@pytest.fixture
def runtime(database: str, request: pytest.FixtureRequest,
            tmp_path: Path) -> Iterator[Runtime]:
    with own_runtime(database, request, tmp_path) as rt:
        yield rt


def _layout(runtime: Runtime) -> tuple[object, object]:
    tenant, other = new_tenant(runtime), new_tenant(runtime)
    raw_events(runtime, tenant, 3, scope="entity", scope_ref="ent_acme")    # due
    raw_events(runtime, tenant, 5, scope="project", scope_ref="p1")         # due
    raw_events(runtime, tenant, 2, scope="entity", scope_ref="ent_small")   # too few
    raw_events(runtime, tenant, 4, scope="entity", scope_ref="ent_young", age_days=30)
    mixed = raw_events(runtime, tenant, 4, scope="team", scope_ref="t1")    # 2 compressed
    raw_events(runtime, tenant, 1, scope="team", scope_ref="t1", age_days=10)
    raw_events(runtime, other, 9, scope="entity", scope_ref="ent_acme")     # other tenant
    with runtime.sessions() as session:
        session.execute(update(MemoryEvent).where(MemoryEvent.id.in_(mixed[:2]))
                        .values(compressed_at=utcnow()))
        session.commit()
    return tenant, other


def test_due_buckets_by_threshold_age_compression_and_tenant(runtime: Runtime) -> None:
    tenant, _ = _layout(runtime)
    with runtime.sessions() as session:
        def due(**kw: object) -> list[tuple[str, str, int]]:
            args = {"cutoff": utcnow() - timedelta(days=90), "min_events": 3} | kw
            return [(b.scope, b.scope_ref, b.events)
                    for b in repo.due_buckets(session, tenant, **args)]  # type: ignore[arg-type]

        assert due() == [("entity", "ent_acme", 3), ("project", "p1", 5)]
        assert due(min_events=2) == [("entity", "ent_acme", 3), ("entity", "ent_small", 2),
                                     ("project", "p1", 5), ("team", "t1", 2)]
        assert due(cutoff=utcnow(), min_events=4) == [("entity", "ent_young", 4),
                                                      ("project", "p1", 5)]
        assert due(scope="entity") == [("entity", "ent_acme", 3)]
        assert due(scope="entity", scope_ref="ent_small", min_events=2) == [
            ("entity", "ent_small", 2)]


def test_a_dry_run_counts_with_the_tenants_thresholds_and_writes_nothing(
        runtime: Runtime) -> None:
    tenant, _ = _layout(runtime)
    actor = Actor(tenant, "system", "test")  # type: ignore[arg-type]
    with runtime.sessions() as session:
        counts = compactor.compact_tenant(session, runtime.plane, runtime.settings,
                                          tenant, actor=actor, dry_run=True)  # type: ignore[arg-type]
        assert counts.as_dict() == {
            "buckets": 2, "compacted_buckets": 2, "events_compressed": 8,
            "entries_written": 2, "failed_buckets": 0, "skipped_buckets": 0,
            "budget_spent": False, "dry_run": True, "failures": {}}
        session.add(CompactorSettings(tenant_id=tenant, min_events=2, older_than_days=20,
                                      enabled=True))
        session.commit()
        counts = compactor.compact_tenant(session, runtime.plane, runtime.settings,
                                          tenant, actor=actor, dry_run=True)  # type: ignore[arg-type]
        assert (counts.buckets, counts.events_compressed) == (5, 16)
        uncompressed = session.query(MemoryEvent).filter(
            MemoryEvent.compressed_at.is_(None)).count()
    assert uncompressed == 3 + 5 + 2 + 4 + 2 + 1 + 9


def test_chunks_split_large_buckets_evenly(runtime: Runtime) -> None:
    run = compactor._Run(None, runtime.plane, runtime.settings, None, None,  # type: ignore[arg-type]
                         dry_run=True, job=None, now=utcnow)
    cap = runtime.settings.compactor_max_events_per_entry
    assert run.chunk_sizes(3) == [3]
    assert run.chunk_sizes(cap) == [cap]
    assert run.chunk_sizes(cap + 1) == [cap // 2 + 1, cap // 2]
    assert sum(run.chunk_sizes(5 * cap + 7)) == 5 * cap + 7
    assert min(run.chunk_sizes(5 * cap + 7)) >= cap // 2


@pytest.mark.databases("postgres")
def test_the_selection_reads_only_the_partial_index(runtime: Runtime) -> None:
    tenant, _ = _layout(runtime)
    query = repo.due_buckets_query(tenant, cutoff=utcnow() - timedelta(days=90),  # type: ignore[arg-type]
                                   min_events=3)
    with runtime.sessions() as session:
        connection = session.connection()
        compiled = query.compile(dialect=connection.dialect)
        # A handful of rows would be read sequentially; what matters is that the index
        # covers the query (the planner's choice on a large table).
        connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
        rows = connection.exec_driver_sql(f"EXPLAIN {compiled}", compiled.params).all()
    plan = "\n".join(row[0] for row in rows)
    assert "Index Only Scan using ix_memory_events_uncompressed" in plan, plan
