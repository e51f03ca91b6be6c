"""An event append racing an erasure of its subject, paused between its put and its commit:
it never lands a body behind the erasure's receipt. On SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from control_plane.compliance import service as compliance
from control_plane.db.base import utcnow
from control_plane.db.models import Job, MemoryEvent, SubjectErasure
from control_plane.errors import SubjectErasureInProgress
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.job_handlers import JobWorker
from tests.support.service import ServiceWorld

from .helpers import job

SUBJECT = "carol"
SPEC = EventIn.model_validate({"scope": "user", "scope_ref": SUBJECT, "kind": "decision",
                               "body": "carol chose the annual plan"})


def _event_objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list_versions(target.path("events") + "/")}


def _rows(world: ServiceWorld) -> list[MemoryEvent]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(MemoryEvent).where(
            MemoryEvent.tenant_id == world.tenant_id)))


def _append(world: ServiceWorld) -> MemoryEvent:
    with world.runtime.sessions() as session:
        event = events.append_event(session, world.runtime.plane, world.actor, SPEC)
    assert isinstance(event, MemoryEvent)
    return event


def test_an_append_whose_commit_meets_the_write_block_is_refused_and_leaves_nothing(
        world: ServiceWorld) -> None:
    put: list[str] = []

    def block_after_put(step: str) -> None:
        if step == "event:after_put" and not put:
            put.extend(_event_objects(world))
            with world.runtime.sessions() as session:
                held = Job(id=uuid.uuid4(), tenant_id=world.tenant_id, kind="erase",
                           state="completed", subject=SUBJECT, params={}, progress={})
                session.add(held)
                session.flush()
                session.add(SubjectErasure(tenant_id=world.tenant_id, user_id=SUBJECT,
                                           job_id=held.id, started_at=utcnow()))
                session.commit()

    world.runtime.plane.checkpoint = block_after_put
    with pytest.raises(SubjectErasureInProgress):
        _append(world)
    assert len(put) == 1  # the body had been put before the block was seen
    assert _rows(world) == []
    assert _event_objects(world) == set()


def test_an_append_outlived_by_a_whole_erasure_does_not_adopt_its_dead_body(
        world: ServiceWorld) -> None:
    """Put before the erasure, commit after its receipt: the body was sealed under the key
    the erasure destroyed, so the append seals and puts a fresh one (a new write after the
    erasure) and the erasure's verification was not fooled."""
    first = _append(world)
    runs: list[uuid.UUID] = []
    put: list[str] = []

    def erase_after_put(step: str) -> None:
        if step == "event:after_put" and not runs:
            put.extend(_event_objects(world) - {first.storage_path})
            with world.runtime.sessions() as session:
                runs.append(compliance.start_erasure(session, world.actor, SUBJECT,
                                                     dry_run=False).id)
            JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                      owner="eraser").run_once()

    world.runtime.plane.checkpoint = erase_after_put
    late = _append(world)
    world.runtime.plane.checkpoint = world.checkpoint

    finished = job(world, runs[0])
    assert finished.state == "completed" and finished.result is not None
    assert finished.result["counts"]["events"] == 1  # the first event; the late one was not in
    [dead] = put
    assert late.storage_path != dead
    assert [r.id for r in _rows(world)] == [late.id]
    assert _event_objects(world) == {late.storage_path}
    with world.runtime.sessions() as session:
        assert events.get_event(session, world.runtime.plane, world.actor,
                                late.id).body == "carol chose the annual plan"
