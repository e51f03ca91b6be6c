"""A write that seals and puts its object for what it remembers (``memories/guesses.py``: the
row's pointer id, the subject's live key), before any lookup, while something else changes
exactly that between its put and its commit — driven there by the write's own pause point
(``write:after_put``), on SQLite and PostgreSQL:

- another writer replaces the row (a new pointer id) or overwrites it (the same one);
- the subject's key is destroyed, or an erasure of the subject runs to its end;
- the tenant's KEK is rotated (every subject key re-wrapped; none changes).

In each, the acknowledged write reads back verified, no object sealed for the wrong row or key
is ever named, and an orphan GC pass afterwards leaves exactly the named objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import service as compliance
from control_plane.db.models import MemoryPointer, SubjectKey
from control_plane.integrity import reconcile
from control_plane.job_handlers import JobWorker
from control_plane.keys import subject_keys as keys
from control_plane.keys.rotation import rotate_kek
from control_plane.memories import hotpath
from control_plane.memories import service as memories
from control_plane.memories.shared import keyring_of
from tests.compliance.helpers import job
from tests.support.service import ServiceWorld


class Race:
    """What runs once at the write's ``write:after_put`` (its object stored, its pointer not
    moved), and how many write lookups had run by then (0: the put was sealed for a guess)."""

    def __init__(self, world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
        self.world = world
        self.lookups = 0
        self.lookups_at_put: int | None = None
        self.in_flight: str | None = None
        self._action: Callable[[], None] | None = None
        real = hotpath.lookup_for_write

        def counted(*args: Any, **kwargs: Any) -> hotpath.WriteLookup:
            self.lookups += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(hotpath, "lookup_for_write", counted)
        world.runtime.plane.checkpoint = self._checkpoint

    def at_put(self, action: Callable[[], None]) -> None:
        self.lookups = 0
        self._action = action
        self._before = objects(self.world)

    def _checkpoint(self, step: str) -> None:
        if step != "write:after_put" or self._action is None:
            return
        action, self._action = self._action, None
        self.lookups_at_put = self.lookups
        (self.in_flight,) = objects(self.world) - self._before
        action()


@pytest.fixture
def race(world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> Iterator[Race]:
    yield Race(world, monkeypatch)
    world.runtime.plane.checkpoint = world.checkpoint



def objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list_versions(target.path("memories") + "/")}


def pointers(world: ServiceWorld) -> dict[str, MemoryPointer]:
    with world.runtime.sessions() as session:
        rows = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id)))
        session.expunge_all()
    return {f"{p.scope_type}/{p.scope_ref}/{p.key}": p for p in rows}


def read_cold(world: ServiceWorld, address: MemoryAddress) -> Any:
    """The value read and verified with every unwrapped key forgotten first, so its subject
    key is unwrapped again from its row (under the KEK that wraps it now)."""
    ring = keyring_of(world.runtime.plane)
    ring.cache.forget(list(ring.cache._items))  # every key this process holds
    return world.read(address)


def gc_leaves_only_named(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        reconcile.collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                  tenant_id=world.tenant_id)
    assert objects(world) == {p.storage_path for p in pointers(world).values()}


def live_key(world: ServiceWorld, subject: tuple[str, str]) -> uuid.UUID:
    with world.runtime.sessions() as session:
        (key_id,) = session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_type == subject[0],
            SubjectKey.scope_ref == subject[1], SubjectKey.destroyed_at.is_(None))).all()
    return key_id


def test_a_row_replaced_after_the_put_gets_the_write_on_the_new_row(
        world: ServiceWorld, race: Race) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper", "k")
    world.write(address, {"v": 0})
    old = world.write(address, {"v": 1})  # the row is known to this process now
    replaced: list[MemoryPointer] = []

    def replace() -> None:  # another writer deletes the row and writes a new one
        with world.runtime.sessions() as session:
            memories.delete_value(session, world.runtime.plane, world.actor, address)
        replaced.append(world.write(address, {"other": True}))

    race.at_put(replace)
    written = world.write(address, {"v": 2})
    assert race.lookups_at_put == 0  # sealed for the remembered row, before any lookup
    assert race.lookups == 1  # its commit refused the old row's id: looked up, put again
    (new_row,) = replaced
    assert new_row.id != old.id
    assert (written.id, written.version) == (new_row.id, 2)
    assert written.storage_path != race.in_flight
    assert race.in_flight not in objects(world)  # the object sealed for the old row went
    assert read_cold(world, address) == {"v": 2}
    gc_leaves_only_named(world)


def test_a_row_overwritten_after_the_put_is_overwritten_again(
        world: ServiceWorld, race: Race) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper", "k")
    world.write(address, {"v": 0})
    race.at_put(lambda: world.write(address, {"other": True}))
    written = world.write(address, {"v": 1})
    assert (race.lookups_at_put, race.lookups) == (0, 0)  # the same row: one statement
    assert (written.version, written.storage_path) == (3, race.in_flight)
    assert read_cold(world, address) == {"v": 1}  # the last commit wins
    gc_leaves_only_named(world)


@pytest.mark.parametrize("new_row", [True, False])
def test_a_subject_key_destroyed_after_the_put_is_not_adopted(
        world: ServiceWorld, race: Race, new_row: bool) -> None:
    first = MemoryAddress.parse(Scope.user, "cy", "a")
    address = MemoryAddress.parse(Scope.user, "cy", "b" if new_row else "a")
    world.write(first, 1)
    world.write(first, 2)
    old_key = live_key(world, ("user", "cy"))

    def shred() -> None:
        with world.runtime.sessions() as session:
            assert keys.shred_subject(session, world.tenant_id, "cy") == 1

    race.at_put(shred)
    written = world.write(address, 3)
    assert race.lookups_at_put == 0
    new_key = live_key(world, ("user", "cy"))
    assert new_key != old_key  # sealed again, under a key made after the shred
    assert written.storage_path != race.in_flight
    assert race.in_flight not in objects(world)
    assert read_cold(world, address) == 3
    if new_row:  # the other memory, sealed under the destroyed key, stays unreadable
        with pytest.raises(Exception, match="destroyed"):
            read_cold(world, first)
    gc_leaves_only_named(world)


def test_an_erasure_completed_after_the_put_leaves_only_the_write_made_after_it(
        world: ServiceWorld, race: Race) -> None:
    subject = MemoryAddress.parse(Scope.user, "dee", "a")
    world.write(subject, 1)
    world.write(MemoryAddress.parse(Scope.user, "bystander", "a"), 1)
    late = MemoryAddress.parse(Scope.user, "dee", "late")
    queued: list[uuid.UUID] = []

    def erase() -> None:
        with world.runtime.sessions() as session:
            queued.append(compliance.start_erasure(session, world.actor, "dee",
                                                   dry_run=False).id)
        JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                  owner=f"race-{uuid.uuid4().hex[:6]}").run_once()

    race.at_put(erase)
    written = world.write(late, {"late": True})
    assert race.lookups_at_put == 0
    (job_id,) = queued
    assert job(world, job_id).state == "completed"
    assert race.in_flight not in objects(world)
    assert set(pointers(world)) == {"user/bystander/a", "user/dee/late"}
    assert written.storage_path != race.in_flight
    assert read_cold(world, late) == {"late": True}
    gc_leaves_only_named(world)


def test_a_kek_rotated_after_the_put_commits_the_object_as_sealed(
        world: ServiceWorld, race: Race) -> None:
    address = MemoryAddress.parse(Scope.user, "eve", "k")
    world.write(address, 1)
    key_before = live_key(world, ("user", "eve"))
    rotated: list[int] = []

    def rotate() -> None:
        with world.runtime.sessions() as session:
            rotated.append(rotate_kek(session, keyring_of(world.runtime.plane),
                                      world.actor).to_version)

    race.at_put(rotate)
    written = world.write(address, 2)
    assert rotated == [2]
    assert (race.lookups_at_put, race.lookups) == (0, 0)  # the key is the same: adopted
    assert (written.version, written.storage_path) == (2, race.in_flight)
    assert live_key(world, ("user", "eve")) == key_before
    assert read_cold(world, address) == 2  # unwrapped under KEK version 2, then verified
    gc_leaves_only_named(world)
