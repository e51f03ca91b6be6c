"""Orphan GC, case by case, on the real local bucket and database (SQLite and PostgreSQL):
what each phase lists, marks, deletes, keeps and rescues, the exact reports, audit rows,
candidate rows and tombstones."""

from __future__ import annotations

import dataclasses
import os
import shutil
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import delete, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import GcCandidate
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.integrity.reconcile import (
    TOMBSTONE_SECONDS,
    GCReport,
    collect_orphans,
    mark_orphans,
    sweep_orphans,
)
from control_plane.memories import repository as repo
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.observability.metrics import Metrics
from storage_adapters.base import StorageUnavailable
from tests.support.service import ServiceWorld

from .helpers import HOUR, age, audit_rows, candidates, file_of, listed, other_world, put, target


def report_of(report: GCReport) -> dict[str, int]:
    return dataclasses.asdict(report)


def gc(world: ServiceWorld, phase: Any, grace: float = 0) -> dict[str, int]:
    with world.runtime.sessions() as session:
        return report_of(phase(session, world.runtime.plane, grace_seconds=grace,
                               tenant_id=world.tenant_id))


def counts(**given: int) -> dict[str, int]:
    return {**report_of(GCReport()), **given}


def named_memory_and_event(world: ServiceWorld) -> tuple[str, str]:
    """A memory and an event, their objects aged past any grace period used here."""
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.user, "u1", "k"), 1, MemoryMeta())
        event = events.append_event(session, world.runtime.plane, world.actor,
                                    EventIn.model_validate({
                                        "scope": "entity", "scope_ref": "ent_acme",
                                        "kind": "decision", "body": "kept"}))
    where = target(world)
    [memory] = listed(where)
    event_path = str(event.storage_path)  # type: ignore[union-attr]
    age(where, memory, 2 * HOUR)
    age(where, event_path, 2 * HOUR)
    return memory, event_path


def test_mark_records_old_unnamed_objects_of_both_prefixes_and_keeps_the_rest(
        world: ServiceWorld) -> None:
    where = target(world)
    memory, event = named_memory_and_event(world)
    # Listed first (its directory sorts first): a young object does not end the listing.
    young = put(where, "memories/user/u1/a/young.json", old=False)
    orphans = {put(where, "memories/user/u1/z/one.json"),
               put(where, "memories/user/u1/z/two.json")}
    event_orphan = put(where, "events/entity/ent_acme/2025/06/lost.json")

    assert gc(world, mark_orphans, grace=3600) == counts(scanned=6, marked=3, young_kept=1)
    assert candidates(world) == dict.fromkeys(orphans | {event_orphan}, False)
    # One row per listing batch: one for memories/, one for events/.
    note = "unnamed object(s) for deletion after the grace period"
    assert audit_rows(world, "gc_mark", "gc") == [
        ("gc_mark", "system", "gc", None, f"marked 2 {note}"),
        ("gc_mark", "system", "gc", None, f"marked 1 {note}"),
    ]
    # Marked now: not due within the grace period, so nothing is deleted yet.
    assert gc(world, sweep_orphans, grace=3600) == counts(waiting=3)
    assert gc(world, mark_orphans, grace=3600) == counts(scanned=6, young_kept=1)
    assert listed(where) | listed(where, "events") == {memory, event, young, event_orphan,
                                                       *orphans}

    assert gc(world, sweep_orphans) == counts(orphans_deleted=3)
    assert listed(where) | listed(where, "events") == {memory, event, young}
    assert candidates(world) == dict.fromkeys(orphans | {event_orphan}, True)  # tombstones
    assert audit_rows(world, "gc")[-1:] == [
        ("gc", "system", "gc", None,
         "deleted 3 orphaned object(s); 0 candidate(s) named again, kept")]
    # A second pass finds nothing to do: the tombstones are neither marked nor swept again.
    assert gc(world, collect_orphans, grace=3600) == counts(scanned=3, young_kept=1)
    assert listed(where) | listed(where, "events") == {memory, event, young}


def test_collect_marks_and_sweeps_in_one_run_with_no_grace(world: ServiceWorld) -> None:
    where = target(world)
    memory, event = named_memory_and_event(world)
    orphan = put(where, "memories/user/u1/z/one.json")
    assert gc(world, collect_orphans) == counts(scanned=3, marked=1, orphans_deleted=1)
    assert listed(where) | listed(where, "events") == {memory, event}
    assert candidates(world) == {orphan: True}


def test_a_candidate_named_by_the_sweep_is_rescued_and_forgotten(world: ServiceWorld) -> None:
    where = target(world)
    memory, event = named_memory_and_event(world)
    orphan = put(where, "memories/user/u1/z/one.json")
    with world.runtime.sessions() as session:  # marked while unnamed (a commit after the list)
        repo.gc_mark(session, world.tenant_id, where.config_id, [memory, event], utcnow())
        session.commit()
    assert gc(world, mark_orphans) == counts(scanned=3, marked=1)
    assert gc(world, sweep_orphans) == counts(orphans_deleted=1, rescued=2)
    assert candidates(world) == {orphan: True}
    assert listed(where) | listed(where, "events") == {memory, event}
    assert world.read(MemoryAddress.parse(Scope.user, "u1", "k")) == 1
    assert audit_rows(world, "gc")[-1:] == [
        ("gc", "system", "gc", None,
         "deleted 1 orphaned object(s); 2 candidate(s) named again, kept")]
    assert gc(world, sweep_orphans) == counts()


def test_a_tombstone_still_listed_is_deleted_again_by_the_next_mark(world: ServiceWorld) -> None:
    where = target(world)
    orphan = put(where, "memories/user/u1/z/one.json")
    assert gc(world, collect_orphans) == counts(scanned=1, marked=1, orphans_deleted=1)
    # The delete did not reach the disk (a crash undid it): the object is back.
    put(where, "memories/user/u1/z/one.json")
    assert gc(world, mark_orphans) == counts(scanned=1, orphans_deleted=1)
    assert listed(where) == set()
    assert candidates(world) == {orphan: True}


def test_tombstones_are_forgotten_once_they_are_older_than_a_week(world: ServiceWorld) -> None:
    where = target(world)
    paths = [put(where, f"memories/user/u1/z/{n}.json") for n in ("old", "young")]
    gc(world, collect_orphans)
    now = utcnow()
    margin = timedelta(seconds=60)
    week = timedelta(seconds=TOMBSTONE_SECONDS)
    assert week == timedelta(days=7)
    with world.runtime.sessions() as session:
        for path, swept in zip(paths, (now - week - margin, now - week + margin), strict=True):
            session.execute(update(GcCandidate).where(GcCandidate.path == path)
                            .values(swept_at=swept))
        session.commit()
    assert gc(world, sweep_orphans) == counts()
    assert candidates(world) == {paths[1]: True}


def test_a_sweep_whose_delete_fails_makes_its_objects_candidates_again(
        world: ServiceWorld) -> None:
    where = target(world)
    path = where.path("memories/user/u1/z/stuck.json")
    (file_of(where, path) / "inside").mkdir(parents=True)  # a delete of it fails
    with world.runtime.sessions() as session:
        repo.gc_mark(session, world.tenant_id, where.config_id, [path], utcnow() - HOUR)
        session.commit()
    try:
        with pytest.raises(StorageUnavailable):
            gc(world, sweep_orphans)
        assert candidates(world) == {path: False}
        assert audit_rows(world, "gc") == []
    finally:
        shutil.rmtree(file_of(where, path))
        with world.runtime.sessions() as session:
            session.execute(delete(GcCandidate).where(GcCandidate.path == path))
            session.commit()


def test_temporaries_a_killed_put_left_are_removed_after_the_grace_period(
        world: ServiceWorld) -> None:
    where = target(world)
    tmp = file_of(where, ".memplane-tmp")
    tmp.mkdir(exist_ok=True)
    stale, fresh = tmp / f"{world.tenant_id}-stale", tmp / f"{world.tenant_id}-fresh"
    stale.write_bytes(b"half a put")
    fresh.write_bytes(b"a put in flight")
    stamp = (utcnow() - 2 * HOUR).timestamp()
    os.utime(stale, (stamp, stamp))
    try:
        assert gc(world, mark_orphans, grace=3600) == counts(temporaries_removed=1)
        assert (stale.exists(), fresh.exists()) == (False, True)
    finally:
        fresh.unlink(missing_ok=True)
        stale.unlink(missing_ok=True)


def test_only_the_tenant_asked_about_is_collected(world: ServiceWorld) -> None:
    stranger = other_world(world)
    theirs = put(target(stranger), "memories/user/u1/z/theirs.json")
    mine = put(target(world), "memories/user/u1/z/mine.json")
    assert gc(world, collect_orphans) == counts(scanned=1, marked=1, orphans_deleted=1)
    assert (listed(target(world)), listed(target(stranger))) == (set(), {theirs})
    assert candidates(world) == {mine: True}
    assert candidates(stranger) == {}
    assert gc(stranger, collect_orphans) == counts(scanned=1, marked=1, orphans_deleted=1)


def test_what_gc_does_is_counted_in_the_metrics(world: ServiceWorld,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = Metrics()
    monkeypatch.setattr(world.runtime.plane, "metrics", metrics)
    where = target(world)
    memory, _ = named_memory_and_event(world)
    for name in ("one", "two"):
        put(where, f"memories/user/u1/z/{name}.json")
    with world.runtime.sessions() as session:
        repo.gc_mark(session, world.tenant_id, where.config_id, [memory], utcnow())
        session.commit()
    assert gc(world, collect_orphans) == counts(scanned=4, marked=2, orphans_deleted=2,
                                                rescued=1)

    def sample(outcome: str) -> float | None:
        return metrics.registry.get_sample_value("memplane_gc_objects_total",
                                                 {"outcome": outcome})

    assert (sample("marked"), sample("deleted"), sample("rescued")) == (2.0, 2.0, 1.0)


def test_orphans_are_marked_and_swept_in_batches_of_a_thousand(world: ServiceWorld) -> None:
    where = target(world)
    folder = file_of(where, where.path("memories/user/u1/z"))
    folder.mkdir(parents=True)
    stamp = (utcnow() - 2 * HOUR).timestamp()
    for n in range(1001):  # written straight into the bucket: a thousand and one crashes
        (folder / f"{n:04}.json").write_bytes(b"left by a crash")
        os.utime(folder / f"{n:04}.json", (stamp, stamp))
    assert gc(world, collect_orphans) == counts(scanned=1001, marked=1001,
                                                orphans_deleted=1001)
    assert [r[4].split(" ", 2)[:2] for r in audit_rows(world, "gc_mark", "gc")] == [
        ["marked", "1000"], ["marked", "1"], ["deleted", "1000"], ["deleted", "1"]]
    assert listed(where) == set()
