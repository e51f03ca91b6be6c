"""Which buckets a run takes: at least ``min_events`` uncompressed events older than
``older_than_days`` per (scope, scope ref), per tenant — one query on the partial index."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select, update

from control_plane.compactor import repository as repo
from control_plane.compactor import service as compactor
from control_plane.compactor.run import Run
from control_plane.db.base import utcnow
from control_plane.db.models import CompactorSettings, MemoryEvent
from control_plane.identity import Actor
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
                                     ("project", "p1", 5), ("team", "t1", 3)]
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
        assert (counts.buckets, counts.events_compressed) == (5, 17)
        uncompressed = session.query(MemoryEvent).filter(
            MemoryEvent.compressed_at.is_(None)).count()
    assert uncompressed == 3 + 5 + 2 + 4 + 2 + 1 + 9


def test_chunks_split_large_buckets_evenly(runtime: Runtime) -> None:
    run = Run(None, runtime.plane, runtime.settings, None, None,  # type: ignore[arg-type]
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


def _bucket_rows(runtime: Runtime, tenant: object, scope: str, scope_ref: str
                 ) -> list[MemoryEvent]:
    with runtime.sessions() as session:
        rows = repo.bucket_events(session, tenant, repo.Bucket(scope, scope_ref, 0),  # type: ignore[arg-type]
                                  cutoff=utcnow(), limit=100)
        session.expunge_all()
        return rows


def test_marking_sets_exactly_the_chunks_events(runtime: Runtime) -> None:
    tenant, other = new_tenant(runtime), new_tenant(runtime)
    raw_events(runtime, tenant, 8, scope="entity", scope_ref="ent_acme")
    # Same times, other buckets and another tenant: inside the statement's time range.
    raw_events(runtime, tenant, 8, scope="entity", scope_ref="ent_beta")
    raw_events(runtime, tenant, 8, scope="project", scope_ref="ent_acme")
    raw_events(runtime, other, 8, scope="entity", scope_ref="ent_acme")
    acme = _bucket_rows(runtime, tenant, "entity", "ent_acme")
    chunk = acme[2:6]  # a middle chunk: events of the bucket before and after it stay
    with runtime.sessions() as session:
        marked = repo.mark_compressed(session, tenant, repo.Bucket("entity", "ent_acme", 8),  # type: ignore[arg-type]
                                      list(reversed(chunk)), utcnow())
        session.commit()
    assert marked == 4
    with runtime.sessions() as session:
        compressed = set(session.scalars(select(MemoryEvent.id).where(
            MemoryEvent.compressed_at.is_not(None))))
    assert compressed == {event.id for event in chunk}
    with runtime.sessions() as session:  # a second run over the same chunk marks none
        again = repo.mark_compressed(session, tenant, repo.Bucket("entity", "ent_acme", 8),  # type: ignore[arg-type]
                                     chunk, utcnow())
        session.commit()
    assert again == 0


@pytest.mark.databases("sqlite")
def test_marking_reads_the_buckets_range_not_the_tenants_events(runtime: Runtime) -> None:
    tenant = new_tenant(runtime)
    # As many ids as a compactor entry has: with many ids SQLite's planner preferred the
    # partial index by its tenant prefix to one id lookup each.
    raw_events(runtime, tenant, 100, scope="entity", scope_ref="ent_acme")
    events = _bucket_rows(runtime, tenant, "entity", "ent_acme")
    assert len(events) == 100
    with runtime.sessions() as session:
        connection = session.connection()
        seen: list[str] = []

        @event.listens_for(connection, "before_cursor_execute")
        def explain(conn: object, cursor: Any, statement: str, parameters: Any,
                    context: object, executemany: bool) -> None:
            if statement.startswith("UPDATE memory_events"):
                cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
                seen.extend(row[3] for row in cursor.fetchall())

        marked = repo.mark_compressed(session, tenant, repo.Bucket("entity", "ent_acme", 100),  # type: ignore[arg-type]
                                      events, utcnow())
        assert marked == 100
        session.rollback()
    # Either the bucket's range of the partial index or the events' ids; never the
    # tenant's prefix alone (every uncompressed event of the tenant, for each entry).
    assert len(seen) == 1, seen
    assert ("ix_memory_events_uncompressed (tenant_id=? AND scope_type=? AND scope_ref=? "
            "AND occurred_at>? AND occurred_at<?)" in seen[0]
            or "sqlite_autoindex_memory_events_1 (id=?)" in seen[0]), seen
