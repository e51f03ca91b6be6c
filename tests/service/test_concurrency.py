"""Concurrent writers: appends lose no item, overwrites leave one consistent pointer, and the
last writer to commit wins (the commits ordered by pausing each writer after its lookup)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

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

    def write(n: int) -> MemoryPointer:
        with world.runtime.sessions() as session:
            result = memories.set_value(session, world.runtime.plane, world.actor, address, n,
                                        META)
        assert isinstance(result, MemoryPointer)
        return result

    with ThreadPoolExecutor(max_workers=6) as pool:
        written = list(pool.map(write, range(30)))
    with world.runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer)
                                        .where(MemoryPointer.tenant_id == world.tenant_id)))
        final = memories.get_value(session, world.runtime.plane, world.actor, address)
        collect_orphans(session, world.runtime.plane, grace_seconds=0, tenant_id=world.tenant_id)
        target = world.runtime.plane.active(session, world.tenant_id)
    assert len(pointers) == 1
    assert pointers[0].version == 30
    assert sorted(p.version for p in written) == list(range(1, 31))  # one commit each
    [last] = [n for n, p in enumerate(written) if p.version == 30]
    assert final.value == last  # the value of the writer whose commit came last
    objects = [i.path for i in target.adapter.list(target.path("memories") + "/")]
    assert objects == [pointers[0].storage_path]


WAIT = 60  # seconds a held writer waits; reached only when the test is broken


def test_the_writer_that_commits_last_wins_though_all_looked_up_first(
        world: ServiceWorld) -> None:
    """Six writers all look the pointer up (each is held there until every one has), then
    are let go one at a time in a shuffled order, each finishing before the next starts: the
    stored value is the one let go last, and each commit bumps the version once."""
    address = MemoryAddress.parse(Scope.user, "u1", "lww")
    order = [3, 0, 5, 1, 4, 2]
    writer = threading.local()
    looked_up = threading.Semaphore(0)
    go = {n: threading.Event() for n in order}

    def hold_after_the_first_lookup(step: str) -> None:
        n = getattr(writer, "n", None)
        if step == "write:after_lookup" and n is not None and not getattr(writer, "held", False):
            writer.held = True
            looked_up.release()
            assert go[n].wait(WAIT), f"writer {n} was never let go"

    def write(n: int) -> MemoryPointer:
        writer.n, writer.held = n, False
        with world.runtime.sessions() as session:
            result = memories.set_value(session, world.runtime.plane, world.actor, address,
                                        {"writer": n}, META)
        assert isinstance(result, MemoryPointer)
        return result

    world.runtime.plane.checkpoint = hold_after_the_first_lookup
    try:
        with ThreadPoolExecutor(max_workers=len(order)) as pool:
            futures: dict[int, Future[MemoryPointer]] = {
                n: pool.submit(write, n) for n in sorted(order)}
            for _ in order:
                assert looked_up.acquire(timeout=WAIT), "a writer never reached its lookup"
            versions = []
            for n in order:
                go[n].set()
                versions.append(futures[n].result(timeout=WAIT).version)
    finally:
        world.runtime.plane.checkpoint = world.checkpoint
    assert versions == [1, 2, 3, 4, 5, 6]  # committed in the order they were let go
    assert world.read(address) == {"writer": order[-1]}
