"""The verified read of a keyless pointer (an entry), through the services on SQLite and
PostgreSQL: when its object fails, the read looks the pointer up again by its id, never by
its scope (where every entry of the scope has the same, empty, key)."""

from __future__ import annotations

import pytest

from control_plane.db.models import MemoryPointer
from control_plane.entries import service as entries
from control_plane.entries.schemas import EntryIn
from control_plane.errors import HashMismatch
from tests.support.service import ServiceWorld


def _create(world: ServiceWorld, title: str) -> MemoryPointer:
    spec = EntryIn(scope="entity", scope_ref="ent_read", title=title, summary=f"{title}.")
    with world.runtime.sessions() as session:
        result = entries.create_entry(session, world.runtime.plane, world.actor, spec)
    assert isinstance(result, MemoryPointer)
    return result


def test_an_entry_whose_object_is_gone_is_refused_not_answered_by_its_neighbour(
        world: ServiceWorld) -> None:
    first = _create(world, "First decision")
    second = _create(world, "Second decision")
    with world.runtime.sessions() as session:
        target = world.runtime.plane.by_id(session, second.storage_config_id)
    target.adapter.delete_many([second.storage_path])
    with world.runtime.sessions() as session, pytest.raises(HashMismatch) as caught:
        entries.get_entry(session, world.runtime.plane, world.actor, second.id)
    assert (caught.value.extra["pointer_id"], caught.value.extra["reason"]) == (
        str(second.id), "missing")
    with world.runtime.sessions() as session:
        assert entries.get_entry(session, world.runtime.plane, world.actor,
                                 first.id).summary == "First decision."
        statuses = {p.id: p.sync_status for p in (session.get(MemoryPointer, first.id),
                                                   session.get(MemoryPointer, second.id))
                    if p is not None}
    assert statuses == {first.id: "synced", second.id: "corrupt"}
