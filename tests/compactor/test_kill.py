"""SIGKILL of a ``memplane worker`` in the middle of the scheduled compaction, then a restart:
the job is taken over when its lease runs out and finishes; each event is summarised into
exactly one entry, no entry lacks its marked events, the counts include the work done before
the kill, and the restart does not queue the day's run again.

The worker queues the day's run itself (schedule ``0 0 * * *``: due all day) and is killed
at a chosen step (``MEMPLANE_TEST_PAUSE_AT``): between the summary's put and its commit, or
right after the first bucket's commit; or in the middle of a group's transaction, every
row of the group written and none committed.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from control_plane.compactor import writing
from control_plane.db.base import utcnow
from control_plane.db.models import CompactionEvent, Job, MemoryEvent, MemoryPointer
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.integrity.reconcile import collect_orphans
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant
from tests.faults.conftest import make_env
from tests.support.clock import wait_until
from tests.support.postgres import PostgresCluster
from tests.support.process import WorkerProcess, wait_for_pause

pytestmark = [pytest.mark.slow, pytest.mark.databases("postgres")]


@pytest.fixture
def env(postgres: PostgresCluster, tmp_path: Path) -> dict[str, str]:
    return {**make_env(postgres.create_database(), tmp_path),
            "MEMPLANE_JOB_LEASE_SECONDS": "2", "MEMPLANE_JOB_POLL_INTERVAL_SECONDS": "0.1",
            "MEMPLANE_COMPACTOR_SCHEDULE": "0 0 * * *"}


@pytest.fixture
def runtime(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rt = Runtime(Settings())
    try:
        yield rt
    finally:
        rt.close()


BUCKETS = (("entity", "ent_acme", 4), ("project", "p1", 3))


def _seed(runtime: Runtime, buckets: tuple[tuple[str, str, int], ...] = BUCKETS,
          ) -> tuple[uuid.UUID, list[uuid.UUID]]:
    with runtime.sessions() as session:
        tenant, _ = create_tenant(session, "kill")
        from control_plane.identity import Actor

        actor = Actor(tenant.id, "api", "seed")
        ids = []
        for scope, ref, n in buckets:
            for i in range(n):
                spec = EventIn(scope=scope, scope_ref=ref, kind="decision",  # type: ignore[arg-type]
                               body=f"We agreed on point {i} of {ref}.",
                               occurred_at=utcnow() - timedelta(days=200 - i))
                event = events.append_event(session, runtime.plane, actor, spec)
                assert isinstance(event, MemoryEvent)
                ids.append(event.id)
    return tenant.id, ids


def _job(runtime: Runtime) -> Job:
    with runtime.sessions() as session:
        jobs = list(session.scalars(select(Job).where(Job.kind == "compact")))
    assert len(jobs) == 1, [(j.id, j.dedupe_key) for j in jobs]
    return jobs[0]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("step", ["compact:marking", "compact:committed"])
def test_the_scheduled_run_killed_mid_bucket_finishes_after_restart(
        env: dict[str, str], runtime: Runtime, tmp_path: Path, step: str) -> None:
    tenant_id, ids = _seed(runtime)
    pause = tmp_path / "pause"
    worker = WorkerProcess(env).start(pause_at=step, pause_file=pause)
    try:
        wait_for_pause(pause, worker.process)
        worker.kill()
        with runtime.sessions() as session:
            written = set(session.scalars(select(MemoryPointer.scope_ref).where(
                MemoryPointer.source == "compactor")))
            marked = set(session.scalars(select(MemoryEvent.id).where(
                MemoryEvent.compressed_at.is_not(None))))
        # Entries are written by several threads: at the kill, each bucket either has its
        # entry and all its events marked, or neither.
        by_bucket = {"ent_acme": set(ids[:4]), "p1": set(ids[4:])}
        assert marked == set().union(*(by_bucket[ref] for ref in written))
        if step == "compact:marking":
            assert written == set()
        else:
            assert written != set()
        assert _job(runtime).state == "running"

        worker = WorkerProcess(env).start()
        wait_until(lambda: _job(runtime).state in ("completed", "failed"),
                   "the compaction job finishing after the restart")
    finally:
        worker.kill()

    job = _job(runtime)  # still one: the restarted worker did not queue the day again
    assert (job.state, job.attempts, job.dedupe_key) == (
        "completed", 2, f"compact:{utcnow().date().isoformat()}")
    assert job.result == {
        "buckets": 2, "compacted_buckets": 2, "events_compressed": 7, "entries_written": 2,
        "failed_buckets": 0, "skipped_buckets": 0, "budget_spent": False, "dry_run": False,
        "failures": {}}
    with runtime.sessions() as session:
        entries_by_scope = Counter(session.execute(
            select(MemoryPointer.scope_type, MemoryPointer.scope_ref).where(
                MemoryPointer.source == "compactor")).all())
        covered = Counter(session.scalars(select(CompactionEvent.event_id)))
        unmarked = session.scalar(select(MemoryEvent.id).where(
            MemoryEvent.compressed_at.is_(None)))
        orphans = collect_orphans(session, runtime.plane, grace_seconds=0,
                                  tenant_id=tenant_id)
    assert entries_by_scope == {("entity", "ent_acme"): 1, ("project", "p1"): 1}
    assert covered == Counter(ids)
    assert unmarked is None
    # Each put killed between the summary's put and its commit left an object nobody names:
    # at least the paused writer's at "marking"; at most one per bucket not committed then.
    least = 1 if step == "compact:marking" else 0
    assert least <= orphans.orphans_deleted <= len(by_bucket) - len(written)


@pytest.mark.timeout(300)
def test_a_worker_killed_inside_a_groups_transaction_leaves_nothing_of_the_group(
        env: dict[str, str], runtime: Runtime, tmp_path: Path) -> None:
    """Three buckets, one group (a group holds up to 16 entries): the kill comes after the
    group's pointers, marks and provenance were written in its open transaction. None of
    them is committed; after the restart each bucket has exactly one entry, each event is
    covered once, and the group's three objects are orphans GC removes."""
    buckets = (("entity", "ent_acme", 4), ("project", "p1", 3), ("team", "growth", 5))
    assert len(buckets) <= writing.GROUP_ENTRIES  # one group
    tenant_id, ids = _seed(runtime, buckets)
    pause = tmp_path / "pause"
    worker = WorkerProcess(env).start(pause_at="compact:group_written", pause_file=pause)
    try:
        wait_for_pause(pause, worker.process)
        worker.kill()
        with runtime.sessions() as session:
            written = session.scalar(select(func.count()).select_from(MemoryPointer).where(
                MemoryPointer.source == "compactor"))
            marked = session.scalar(select(func.count()).select_from(MemoryEvent).where(
                MemoryEvent.compressed_at.is_not(None)))
            provenance = session.scalar(select(func.count()).select_from(CompactionEvent))
        assert (written, marked, provenance) == (0, 0, 0)
        assert _job(runtime).state == "running"

        worker = WorkerProcess(env).start()
        wait_until(lambda: _job(runtime).state in ("completed", "failed"),
                   "the compaction job finishing after the restart")
    finally:
        worker.kill()

    job = _job(runtime)
    assert (job.state, job.attempts) == ("completed", 2)
    assert job.result == {
        "buckets": 3, "compacted_buckets": 3, "events_compressed": 12, "entries_written": 3,
        "failed_buckets": 0, "skipped_buckets": 0, "budget_spent": False, "dry_run": False,
        "failures": {}}
    with runtime.sessions() as session:
        entries_by_scope = Counter(session.execute(
            select(MemoryPointer.scope_type, MemoryPointer.scope_ref).where(
                MemoryPointer.source == "compactor")).all())
        covered = Counter(session.scalars(select(CompactionEvent.event_id)))
        unmarked = session.scalar(select(MemoryEvent.id).where(
            MemoryEvent.compressed_at.is_(None)))
        orphans = collect_orphans(session, runtime.plane, grace_seconds=0,
                                  tenant_id=tenant_id)
    assert entries_by_scope == {("entity", "ent_acme"): 1, ("project", "p1"): 1,
                                ("team", "growth"): 1}
    assert covered == Counter(ids)
    assert unmarked is None
    assert orphans.orphans_deleted == 3
