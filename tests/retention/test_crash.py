"""A retention run stopped dead half-way (a second batch, at each step of the delete
protocol) and rerun by another worker deletes everything due exactly once — one audit row
per item, the job's counts exact — and leaves the planes consistent: every pointer names an
object that exists, and no object of a deleted pointer is left. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from control_plane.db.models import Job
from control_plane.job_handlers import JobWorker
from control_plane.retention import schedule, sweep
from control_plane.retention.schemas import RetentionRunIn
from tests.retention.helpers import backdate, deletes, objects, pointers, policy, put
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld, SimulatedCrash


@pytest.mark.parametrize("step", ["retention:after_mark", "delete:after_object"])
def test_a_run_killed_half_way_and_rerun_deletes_each_due_item_once(
        lone_world: ServiceWorld, step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    world = lone_world
    monkeypatch.setattr(sweep, "BATCH", 3)
    clock = ManualWallClock()
    policy_id = policy(world, scope="user", retention_days=30, auto_delete=True)
    due = [put(world, "user", f"u{n % 2}", f"old-{n}") for n in range(8)]
    fresh = [put(world, "user", "u0", f"new-{n}") for n in range(2)]
    backdate(world, [p.id for p in due], clock() - timedelta(days=40))

    reached = {"count": 0}

    def crash_on_second_batch(name: str) -> None:
        if name == step:
            reached["count"] += 1
            if reached["count"] == 2:
                raise SimulatedCrash(name)

    world.runtime.plane.checkpoint = crash_on_second_batch
    with world.runtime.sessions() as session:
        job = schedule.start_run(session, world.actor, RetentionRunIn())
    settings = world.runtime.settings
    first = JobWorker(world.runtime.sessions, world.runtime.plane, settings, owner="first",
                      clock=clock, lease_seconds=30)
    with pytest.raises(SimulatedCrash):
        first.run_once()
    # half-way: the first batch is gone, the second is marked (and maybe its objects gone)
    assert len(deletes(world)) == 3
    left = pointers(world)
    assert len(left) == 7
    assert sum(p.sync_status == "pending_delete" for p in left.values()) == 3

    world.runtime.plane.checkpoint = lambda _name: None
    # the dead worker's lease runs out (progress saves renew it from the real clock, so
    # move well past any renewal made while the first attempt ran)
    clock.advance(3600)
    second = JobWorker(world.runtime.sessions, world.runtime.plane, settings, owner="second",
                       clock=clock, lease_seconds=30)
    assert second.run_once() == job.id

    with world.runtime.sessions() as session:
        finished = session.scalars(select(Job).where(Job.id == job.id)).one()
    assert (finished.state, finished.attempts) == ("completed", 2)
    assert finished.result is not None
    assert finished.result["policies"][0]["deleted"] == 8
    assert finished.result["deleted"] == 8
    rows = deletes(world)
    assert sorted(r.pointer_id for r in rows) == sorted(p.id for p in due)  # type: ignore[type-var]
    assert {r.detail for r in rows} == {
        f"retention policy {policy_id} (user/*, 30 days)"}
    survivors = pointers(world)
    assert set(survivors) == {p.key for p in fresh}
    assert all(p.sync_status == "synced" for p in survivors.values())
    # both planes agree: exactly the survivors' objects remain
    assert objects(world, "memories") == {p.storage_path for p in survivors.values()}
