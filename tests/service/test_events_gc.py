"""Orphan GC and the event log: a body an event row names always survives; a body no row
names (an append that crashed between its put and its commit) is collected. On SQLite and
PostgreSQL, through the services."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id
from control_plane.db.models import MemoryEvent
from control_plane.errors import InvalidInput
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.integrity.reconcile import collect_orphans, mark_orphans, sweep_orphans
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld


def append(world: ServiceWorld, body: str = "## note\nA decision.", **extra: object) -> MemoryEvent:
    spec = EventIn.model_validate({"scope": "entity", "scope_ref": "ent_acme",
                                   "kind": "decision", "body": body, **extra})
    with world.runtime.sessions() as session:
        result = events.append_event(session, world.runtime.plane, world.actor, spec)
    assert isinstance(result, MemoryEvent)
    return result


def read(world: ServiceWorld, event: MemoryEvent) -> str:
    with world.runtime.sessions() as session:
        return events.get_event(session, world.runtime.plane, world.actor, event.id).body


def objects(world: ServiceWorld, prefix: str) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list(target.path(prefix) + "/")}


def put_orphan(world: ServiceWorld, relative: str) -> str:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    path = target.path(relative)
    target.adapter.put(path, b"left by a crash")
    return path


def rows(world: ServiceWorld) -> list[MemoryEvent]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(MemoryEvent).where(
            MemoryEvent.tenant_id == world.tenant_id)))


def test_gc_keeps_every_event_body_and_collects_unnamed_ones(world: ServiceWorld) -> None:
    kept = [append(world, f"event {n}", occurred_at=datetime(2025, n, 1, tzinfo=UTC))
            for n in (1, 6, 12)]
    orphan = put_orphan(world, f"events/entity/ent_acme/2025/06/{new_id()}.json")
    stray = put_orphan(world, "events/entity/ent_acme/2025/06/not-an-event.json")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.user, "u1", "k"), 1, MemoryMeta())
    memory_orphan = put_orphan(world, f"memories/user/u1/k/{new_id().hex}.json")
    assert objects(world, "events") == {e.storage_path for e in kept} | {orphan, stray}

    with world.runtime.sessions() as session:
        report = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                 tenant_id=world.tenant_id)

    assert report.orphans_deleted == 3
    assert objects(world, "events") == {e.storage_path for e in kept}
    assert memory_orphan not in objects(world, "memories")
    assert len(objects(world, "memories")) == 1
    assert [read(world, e) for e in kept] == ["event 1", "event 6", "event 12"]
    # a second run finds nothing more to collect
    with world.runtime.sessions() as session:
        again = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                tenant_id=world.tenant_id)
    assert (again.marked, again.orphans_deleted) == (0, 0)


def test_an_append_never_adopts_a_body_gc_marked_in_flight(world: ServiceWorld) -> None:
    """The put lands, GC lists and marks it (no row yet), then the append commits: it puts a
    fresh body instead of naming the candidate, which the sweep then deletes."""
    seen: list[str] = []

    def gc_between_put_and_commit(step: str) -> None:
        if step == "event:after_put" and not seen:
            seen.extend(objects(world, "events"))
            with world.runtime.sessions() as session:
                mark_orphans(session, world.runtime.plane, grace_seconds=0,
                             tenant_id=world.tenant_id)

    world.runtime.plane.checkpoint = gc_between_put_and_commit
    event = append(world, "kept")
    world.runtime.plane.checkpoint = world.checkpoint
    [first] = seen
    assert event.storage_path != first
    with world.runtime.sessions() as session:
        report = sweep_orphans(session, world.runtime.plane, grace_seconds=0,
                               tenant_id=world.tenant_id)
    assert report.orphans_deleted == 1
    assert objects(world, "events") == {event.storage_path}
    assert read(world, event) == "kept"
    assert [r.id for r in rows(world)] == [event.id]


def test_list_refuses_an_unknown_scope_with_a_sentence(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session, pytest.raises(InvalidInput) as caught:
        events.list_events(session, world.actor, scope="galaxy", scope_ref=None)
    assert caught.value.detail.startswith("scope must be one of tenant, institutional,")
