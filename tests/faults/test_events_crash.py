"""Crash tests for the event append protocol (I1, I2): stopped dead between each pair of its
steps, an append leaves either a synced row naming an intact body or no row and an orphan
body, which orphan GC removes. On SQLite and PostgreSQL, through the services."""

from __future__ import annotations

import pytest

from control_plane.integrity.reconcile import collect_orphans
from tests.service.test_events_gc import append, objects, read, rows
from tests.support.service import ServiceWorld, SimulatedCrash


@pytest.mark.parametrize(("step", "committed"), [
    ("event:after_put", False),      # the body is in the bucket, no row
    ("event:before_commit", False),  # the row's transaction never committed
    ("event:after_commit", True),    # committed: the event is there for good
])
def test_a_crash_leaves_a_row_with_its_body_or_an_orphan_gc_removes(
        world: ServiceWorld, step: str, committed: bool) -> None:
    before = append(world, "before the crash")
    world.crash_at = step
    with pytest.raises(SimulatedCrash):
        append(world, "the crashed append")
    after_crash = objects(world, "events")
    assert len(after_crash) == 2  # the crashed append's body was put in every case
    assert len(rows(world)) == (2 if committed else 1)

    with world.runtime.sessions() as session:
        report = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                 tenant_id=world.tenant_id)

    assert report.orphans_deleted == (0 if committed else 1)
    survivors = rows(world)
    assert objects(world, "events") == {r.storage_path for r in survivors}
    assert {read(world, r) for r in survivors} == (
        {"before the crash", "the crashed append"} if committed else {"before the crash"})
    assert before.id in {r.id for r in survivors}
    # the log keeps working after the crash
    assert read(world, append(world, "after the crash")) == "after the crash"
