"""Concurrent writers: appends lose no item, overwrites leave one consistent pointer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer
from control_plane.integrity.reconcile import collect_orphans
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

META = MemoryMeta()


def test_concurrent_appends_keep_every_item(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.conversation, "c1", "messages")

    def append(n: int) -> None:
        with world.runtime.sessions() as session:
            memories.append_value(session, world.runtime.plane, world.actor, address, n, META)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(append, range(24)))
    with world.runtime.sessions() as session:
        result = memories.get_value(session, world.runtime.plane, world.actor, address)
    assert sorted(result.value) == list(range(24))
    assert result.pointer.version == 24


def test_concurrent_overwrites_leave_one_pointer_and_one_object(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "status")

    def write(n: int) -> None:
        with world.runtime.sessions() as session:
            memories.set_value(session, world.runtime.plane, world.actor, address, n, META)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(write, range(30)))
    with world.runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer)
                                        .where(MemoryPointer.tenant_id == world.tenant_id)))
        final = memories.get_value(session, world.runtime.plane, world.actor, address)
        collect_orphans(session, world.runtime.plane, grace_seconds=0, tenant_id=world.tenant_id)
        target = world.runtime.plane.active(session, world.tenant_id)
    assert len(pointers) == 1
    assert pointers[0].version == 30
    assert final.value in range(30)
    objects = [i.path for i in target.adapter.list(target.path("memories") + "/")]
    assert objects == [pointers[0].storage_path]
