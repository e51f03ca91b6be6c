"""An append whose new object orphan GC marks between the put and the commit (a pass that
runs while the append is in flight sees the object named by no row) never adopts it: the
append starts over with a fresh object and succeeds, and the marked one is left to the sweep.
Forced at the append's own checkpoint after the put; PostgreSQL, where GC's session writes
while the append holds its row lock (on SQLite the append's write lock keeps GC out)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import GcCandidate, MemoryPointer
from control_plane.integrity import reconcile
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.plane.data_plane import no_faults
from tests.support.service import ServiceWorld


@pytest.mark.databases("postgres")
def test_an_append_whose_new_object_gc_marked_meanwhile_starts_over(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.agent, "agent-rebind", "log")
    with world.runtime.sessions() as session:
        memories.append_value(session, world.runtime.plane, world.actor, address, "first",
                              MemoryMeta())
    marked: list[int] = []

    def gc_after_put(step: str) -> None:
        if step == "write:after_put" and not marked:
            with world.runtime.sessions() as gc:
                report = reconcile.mark_orphans(gc, world.runtime.plane, grace_seconds=0,
                                                tenant_id=world.tenant_id)
            marked.append(report.marked)

    world.runtime.plane.checkpoint = gc_after_put
    try:
        with world.runtime.sessions() as session:
            pointer: Any = memories.append_value(session, world.runtime.plane, world.actor,
                                                 address, "second", MemoryMeta())
    finally:
        world.runtime.plane.checkpoint = no_faults
    with world.runtime.sessions() as session:
        value = memories.get_value(session, world.runtime.plane, world.actor, address).value
        candidates = set(session.scalars(select(GcCandidate.path).where(
            GcCandidate.tenant_id == world.tenant_id)))
        row = session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id,
            MemoryPointer.scope_ref == "agent-rebind")).one()

    assert marked == [1]  # the first attempt's object, in flight, was marked
    assert value == ["first", "second"]
    assert (row.version, row.sync_status) == (2, "synced")
    assert row.storage_path == pointer.storage_path
    assert row.storage_path not in candidates  # a marked object is never adopted
