"""Writes that seal and put before any lookup, for what the lookup is guessed to find
(control_plane/memories/guesses.py): they take one statement when the guess holds, and
when it does not — the row or the key changed behind this process's back — the write still
lands exactly as a looked-up one would, and the object sealed for the wrong guess is gone."""

from __future__ import annotations

import uuid

from sqlalchemy import delete, select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer, SubjectKey
from control_plane.memories import guesses, hotpath
from tests.support.service import ServiceWorld


def _puts(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return int(target.adapter.stats.counts.get("put", 0))


def _named(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        return set(session.scalars(select(MemoryPointer.storage_path).where(
            MemoryPointer.tenant_id == world.tenant_id)))


def test_writes_after_the_first_of_a_scope_take_no_lookup(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    first = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(first, 1)  # creates ada's key: the general path, which looks up
    assert lookups == [first]
    overwritten = world.write(first, 2)  # the row and the key are known
    new = world.write(MemoryAddress.parse(Scope.user, "ada", "b"), 3)  # a new row, known key
    assert lookups == [first]
    assert (overwritten.version, new.version) == (2, 1)
    assert (world.read(first), world.read(MemoryAddress.parse(Scope.user, "ada", "b"))) == (2, 3)
    assert world.objects() == _named(world)  # superseded objects went, nothing else left


def test_a_row_deleted_behind_the_process_is_written_anew(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper", "k")
    old = world.write(address, {"v": 1})
    with world.runtime.sessions() as session:  # another replica deletes it
        session.execute(delete(MemoryPointer).where(MemoryPointer.id == old.id))
        session.commit()
    lookups.clear()
    puts = _puts(world)
    written = world.write(address, {"v": 2})
    # the guess (the old row) was put and failed; looked up, then put and written
    assert (lookups, _puts(world) - puts) == ([address], 2)
    assert written.id != old.id and written.version == 1
    assert world.read(address) == {"v": 2}
    assert world.objects() - {old.storage_path} == _named(world)


def test_a_row_whose_subject_changed_behind_the_process_is_sealed_for_the_new_one(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper", "pref")
    world.write(MemoryAddress.parse(Scope.user, "bo", "warm"), 0)  # bo's key exists
    old = world.write(address, {"v": 1})
    with world.runtime.sessions() as session:  # another replica tagged it with bo
        session.execute(update(MemoryPointer).where(MemoryPointer.id == old.id)
                        .values(subject_user_id="bo"))
        session.commit()
    lookups.clear()
    puts = _puts(world)
    written = world.write(address, {"v": 2})
    assert (lookups, _puts(world) - puts) == ([address], 2)
    assert (written.id, written.version, written.subject_user_id) == (old.id, 2, "bo")
    assert world.read(address) == {"v": 2}  # sealed under bo's key, which the row names
    assert world.objects() == _named(world)


def test_a_key_destroyed_behind_the_process_is_not_sealed_under(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    first = MemoryAddress.parse(Scope.user, "cy", "a")
    world.write(first, 1)
    with world.runtime.sessions() as session:  # another replica shredded cy's key
        session.execute(delete(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id))
        (old_key,) = session.execute(update(SubjectKey).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_ref == "cy")
            .values(destroyed_at=utcnow(), wrapped_key=None).returning(SubjectKey.id)).one()
        session.commit()
    lookups.clear()
    second = MemoryAddress.parse(Scope.user, "cy", "b")
    puts = _puts(world)
    world.write(second, 2)
    assert (lookups, _puts(world) - puts) == ([second], 2)
    with world.runtime.sessions() as session:
        live = session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_ref == "cy",
            SubjectKey.destroyed_at.is_(None))).all()
    assert len(live) == 1 and live[0] != old_key
    assert world.read(second) == 2
    assert world.objects() - {p for p in world.objects() if "/cy/a/" in p} == _named(world)


def test_a_new_address_is_guessed_only_on_a_bucket_of_cheap_puts() -> None:
    tenant = uuid.uuid4()
    key_id = uuid.uuid4()
    guesses.saw_key(tenant, ("agent", "helper"), key_id)
    new = MemoryAddress.parse(Scope.agent, "helper", "fresh")
    assert guesses.guess(tenant, new, None, cheap_puts=False, encrypted=True) is None
    found, subject, guessed = guesses.guess(tenant, new, None, cheap_puts=True,
                                            encrypted=True) or (None, None, None)
    assert found == hotpath.WriteLookup(None, None, None, None)
    assert (subject, guessed) == (("agent", "helper"), key_id)
    # a known row is guessed on any bucket; one whose subject is some other user is not kept
    pointer_id = uuid.uuid4()
    guesses.saw_row(tenant, new, pointer_id, None)
    assert guesses.guess(tenant, new, None, cheap_puts=False, encrypted=True) == (
        hotpath.WriteLookup(pointer_id, None, None, None), ("agent", "helper"), key_id)
    guesses.saw_row(tenant, new, pointer_id, "dee")
    assert guesses.guess(tenant, new, None, cheap_puts=False, encrypted=True) is None
    # a user scope's own user is kept (as the scope, not as a string of its own)
    mine = MemoryAddress.parse(Scope.user, "eve", "k")
    guesses.saw_key(tenant, ("user", "eve"), key_id)
    guesses.saw_row(tenant, mine, pointer_id, "eve")
    assert guesses.guess(tenant, mine, None, cheap_puts=False, encrypted=True) == (
        hotpath.WriteLookup(pointer_id, "eve", None, None), ("user", "eve"), key_id)
