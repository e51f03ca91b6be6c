"""Cleanup through the services, on SQLite and PostgreSQL, with an injected ``now``: a dry run
lists what would go, excluded keys and held memories stay and are counted, a real cleanup
deletes on both planes with one audit row each, and a large one becomes a job."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from control_plane.db.models import AccessLog, Job
from control_plane.identity import Access, Grant
from control_plane.job_handlers import JobWorker
from control_plane.retention import cleanup
from control_plane.retention.schemas import CleanupIn, CleanupOut
from tests.retention.helpers import deletes, hold, objects, pointers, put
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld


def _cleanup(world: ServiceWorld, now: Any, access: Access | None = None,
             **body: Any) -> CleanupOut | Job:
    with world.runtime.sessions() as session:
        return cleanup.cleanup(session, world.runtime.plane, world.actor,
                                 CleanupIn.model_validate(body), now=now,
                                 **({"access": access} if access else {}))


def _seed(world: ServiceWorld) -> dict[str, Any]:
    return {
        "a": put(world, "agent", "bot", "history", agent_id="bot"),
        "b": put(world, "agent", "bot", "preferences", agent_id="bot"),
        "c": put(world, "user", "u1", "notes", agent_id="bot"),
        "d": put(world, "user", "u2", "notes2", agent_id="other"),
    }


def test_a_dry_run_lists_what_would_go_and_deletes_nothing(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    seeded = _seed(world)
    clock.advance(181 * 86400)
    result = _cleanup(world, clock(), agent_id="bot", older_than_days=180,
                      exclude_keys=["preferences"], dry_run=True)
    assert isinstance(result, CleanupOut)
    assert (result.dry_run, result.matched, result.deleted, result.excluded, result.held,
            result.truncated) == (True, 2, 0, 1, 0, False)
    assert result.items is not None
    assert sorted((i.pointer_id, i.scope, i.scope_ref, i.key) for i in result.items) == sorted(
        (seeded[k].id, seeded[k].scope_type, seeded[k].scope_ref, seeded[k].key)
        for k in ("a", "c"))
    assert len(pointers(world)) == 4

    too_young = _cleanup(world, clock(), agent_id="bot", older_than_days=200, dry_run=True)
    assert isinstance(too_young, CleanupOut) and too_young.matched == 0


def test_a_cleanup_deletes_on_both_planes_skipping_excluded_and_held(
        world: ServiceWorld) -> None:
    clock = ManualWallClock()
    seeded = _seed(world)
    hold_id = hold(world, user_id="u1", reason="litigation")
    clock.advance(181 * 86400)
    result = _cleanup(world, clock(), agent_id="bot", older_than_days=180,
                      exclude_keys=["preferences"])
    assert isinstance(result, CleanupOut)
    assert (result.matched, result.deleted, result.excluded, result.held) == (1, 1, 1, 1)
    assert set(pointers(world)) == {"preferences", "notes", "notes2"}
    assert seeded["a"].storage_path not in objects(world, "memories")
    assert [(r.pointer_id, r.detail) for r in deletes(world)] == [(seeded["a"].id, "cleanup")]
    with world.runtime.sessions() as session:
        summary = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "cleanup")).all()
    assert summary == ["1 deleted, 1 held, 1 excluded, 0 important"]
    assert hold_id  # the hold stays active


def test_a_scoped_key_cleans_only_what_it_may_see(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    _seed(world)
    clock.advance(181 * 86400)
    access = Access((Grant("user", "u1"),), None)
    result = _cleanup(world, clock(), access=access, older_than_days=180)
    assert isinstance(result, CleanupOut) and result.deleted == 1
    assert set(pointers(world)) == {"history", "preferences", "notes2"}


def test_a_large_cleanup_runs_as_a_job(lone_world: ServiceWorld,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    world = lone_world
    monkeypatch.setattr(cleanup, "CLEANUP_INLINE_LIMIT", 2)
    clock = ManualWallClock()
    for n in range(5):
        put(world, "team", "t1", f"k{n}")
    put(world, "team", "t1", "keep")
    clock.advance(10 * 86400)
    job = _cleanup(world, clock(), scope="team", scope_ref="t1", older_than_days=5,
                   exclude_keys=["keep"])
    assert isinstance(job, Job) and (job.kind, job.state) == ("cleanup", "queued")
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                       owner="w")
    assert worker.run_once() == job.id
    with world.runtime.sessions() as session:
        done = session.get(Job, job.id)
    assert done is not None and (done.state, done.result) == (
        "completed", {"dry_run": False, "deleted": 5, "held": 0})
    assert set(pointers(world)) == {"keep"}
    assert (done.subject, done.params) == (
        None, {"older_than_days": 5, "dry_run": False, "scope": "team"})
    assert len(deletes(world)) == 5
