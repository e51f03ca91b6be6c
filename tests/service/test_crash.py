"""Crash tests for the write and delete protocols (I1, I2).

A write or delete is stopped dead between each pair of its steps; afterwards every synced
pointer must name an intact object, every acknowledged write must read back, and the
reconciler plus orphan GC must leave the bucket holding exactly what the pointers name.
"""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id, utcnow
from control_plane.db.models import MemoryPointer
from control_plane.errors import NotFound
from control_plane.integrity.reconcile import (
    collect_orphans,
    mark_orphans,
    reconcile,
    sweep_orphans,
)
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.crypto import plaintext_of, seal_for
from tests.support.service import ServiceWorld, SimulatedCrash

ADDRESS = MemoryAddress.parse(Scope.user, "u1", "profile")
META = MemoryMeta()


def _set(world: ServiceWorld, value: object, address: MemoryAddress = ADDRESS) -> None:
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, value, META)



def _pointers(world: ServiceWorld) -> list[MemoryPointer]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(MemoryPointer)
                                    .where(MemoryPointer.tenant_id == world.tenant_id)))




def _assert_pointer_truth(world: ServiceWorld) -> None:
    """I1: every synced pointer names an object whose plaintext hashes to the pointer's hash."""
    for pointer in _pointers(world):
        if pointer.sync_status == "synced":
            data = plaintext_of(world.runtime, pointer)
            assert hashlib.sha256(data).hexdigest() == pointer.content_sha256


def _settle(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        report = reconcile(session, world.runtime.plane, grace_seconds=0,
                           tenant_id=world.tenant_id)
        assert report.errors == []
        # Orphan GC's two phases, as two runs would do them once the grace period passed.
        mark_orphans(session, world.runtime.plane, grace_seconds=0, tenant_id=world.tenant_id)
        sweep_orphans(session, world.runtime.plane, grace_seconds=0, tenant_id=world.tenant_id)
    pointers = _pointers(world)
    assert {p.sync_status for p in pointers} <= {"synced"}
    assert world.objects() == {p.storage_path for p in pointers}


@pytest.mark.parametrize("step, survivor", [
    ("write:after_put", "v1"),          # new object orphaned, pointer untouched
    ("write:before_commit", "v1"),      # transaction never committed
    ("write:after_commit", "v2"),       # committed; superseded object left behind
])
def test_crash_during_overwrite(world: ServiceWorld, step: str, survivor: str) -> None:
    _set(world, "v1")
    world.crash_at = step
    with pytest.raises(SimulatedCrash):
        _set(world, "v2")
    _assert_pointer_truth(world)
    assert world.read(ADDRESS) == survivor
    assert len(world.objects()) == 2  # the survivor's object and one orphan
    _settle(world)
    assert len(world.objects()) == 1
    assert world.read(ADDRESS) == survivor


@pytest.mark.parametrize("step", ["write:after_put", "write:before_commit"])
def test_crash_during_first_write_leaves_no_pointer(world: ServiceWorld, step: str) -> None:
    world.crash_at = step
    with pytest.raises(SimulatedCrash):
        _set(world, "first")
    assert _pointers(world) == []
    with pytest.raises(NotFound):
        world.read(ADDRESS)
    _settle(world)
    assert world.objects() == set()


@pytest.mark.parametrize("step", ["delete:after_mark", "delete:after_object"])
def test_crash_during_delete(world: ServiceWorld, step: str) -> None:
    _set(world, "doomed")
    world.crash_at = step
    with world.runtime.sessions() as session, pytest.raises(SimulatedCrash):
        memories.delete_value(session, world.runtime.plane, world.actor, ADDRESS)
    assert [p.sync_status for p in _pointers(world)] == ["pending_delete"]
    with pytest.raises(NotFound):
        world.read(ADDRESS)
    _assert_pointer_truth(world)
    _settle(world)
    assert _pointers(world) == []
    assert world.objects() == set()


def test_crash_during_clear_is_finished_by_rerun(world: ServiceWorld) -> None:
    addresses = [MemoryAddress.parse(Scope.conversation, "c1", f"k{n}") for n in range(4)]
    for n, address in enumerate(addresses):
        _set(world, n, address)
    world.crash_at = "delete:after_mark"
    scope = MemoryAddress.parse(Scope.conversation, "c1")
    with world.runtime.sessions() as session, pytest.raises(SimulatedCrash):
        memories.clear_scope(session, world.runtime.plane, world.actor, scope)
    with world.runtime.sessions() as session:
        assert memories.clear_scope(session, world.runtime.plane, world.actor, scope) == 4
    assert _pointers(world) == []
    assert world.objects() == set()


def test_reconciler_settles_pending_writes_by_asking_the_bucket(world: ServiceWorld) -> None:
    _set(world, "seed")  # creates the storage target's prefix
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
        seed = session.scalars(select(MemoryPointer)
                               .where(MemoryPointer.tenant_id == world.tenant_id)).one()
        rows = {}
        for name, present in (("arrived", True), ("lost", False)):
            data = f'"{name}"'.encode()
            path = target.path(f"memories/user/u1/{name}/{new_id().hex}.json")
            pointer_id = new_id()
            if present:
                target.adapter.put(path, seal_for(world.runtime, world.tenant_id, path,
                                                  pointer_id, ("user", "u1"), data))
            rows[name] = MemoryPointer(
                id=pointer_id, tenant_id=world.tenant_id, scope_type="user", scope_ref="u1",
                key=name, memory_type="fact", tags=[], importance=3, source="api",
                storage_config_id=seed.storage_config_id, storage_path=path,
                content_sha256=hashlib.sha256(data).hexdigest(), content_size=len(data),
                sync_status="pending_write", version=1, has_embeddings=False,
                created_at=utcnow(), updated_at=utcnow(),
            )
            session.add(rows[name])
        session.commit()
        report = reconcile(session, world.runtime.plane, grace_seconds=0,
                           tenant_id=world.tenant_id)
    assert (report.writes_completed, report.writes_rolled_back) == (1, 1)
    assert world.read(MemoryAddress.parse(Scope.user, "u1", "arrived")) == "arrived"
    with pytest.raises(NotFound):
        world.read(MemoryAddress.parse(Scope.user, "u1", "lost"))
    _settle(world)


def test_gc_keeps_young_orphans_until_the_grace_period_passes(world: ServiceWorld) -> None:
    world.crash_at = "write:after_put"
    with pytest.raises(SimulatedCrash):
        _set(world, "orphan")
    with world.runtime.sessions() as session:
        young = collect_orphans(session, world.runtime.plane, grace_seconds=3600,
                                tenant_id=world.tenant_id)
        assert (young.marked, young.orphans_deleted, young.young_kept) == (0, 0, 1)
        old = collect_orphans(session, world.runtime.plane, grace_seconds=0,
                              tenant_id=world.tenant_id)
        assert (old.marked, old.orphans_deleted) == (1, 1)
    assert world.objects() == set()


def test_gc_deletes_a_marked_orphan_only_on_a_later_sweep(world: ServiceWorld) -> None:
    world.crash_at = "write:after_put"
    with pytest.raises(SimulatedCrash):
        _set(world, "orphan")
    orphan = world.objects()
    with world.runtime.sessions() as session:
        marked = mark_orphans(session, world.runtime.plane, grace_seconds=0,
                              tenant_id=world.tenant_id)
        early = sweep_orphans(session, world.runtime.plane, grace_seconds=3600,
                              tenant_id=world.tenant_id)
    assert (marked.scanned, marked.marked) == (1, 1)
    assert (early.orphans_deleted, early.waiting) == (0, 1)
    assert world.objects() == orphan
    with world.runtime.sessions() as session:
        again = mark_orphans(session, world.runtime.plane, grace_seconds=0,
                             tenant_id=world.tenant_id)
        late = sweep_orphans(session, world.runtime.plane, grace_seconds=0,
                             tenant_id=world.tenant_id)
    assert again.marked == 0  # already a candidate; its mark time is kept
    assert (late.orphans_deleted, late.waiting) == (1, 0)
    assert world.objects() == set()


def test_gc_spares_a_candidate_that_a_pointer_names_by_the_sweep(world: ServiceWorld) -> None:
    _set(world, "kept")
    [pointer] = _pointers(world)
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    # A candidate marked while unnamed (as if its pointer's commit came after the listing).
    from control_plane.memories import repository as repo

    with world.runtime.sessions() as session:
        repo.gc_mark(session, world.tenant_id, target.config_id, [pointer.storage_path],
                     utcnow())
        session.commit()
        swept = sweep_orphans(session, world.runtime.plane, grace_seconds=0,
                              tenant_id=world.tenant_id)
    assert (swept.orphans_deleted, swept.rescued) == (0, 1)
    assert world.read(ADDRESS) == "kept"
    _settle(world)
