"""An append that fails after its object was put: refused because the memory's data subject
is being erased (409 naming the job, the list as it was, and the object it put deleted, not
left to orphan GC), or losing its connection at the commit (the outcome is unknown, so the
database's error is raised as it was and the object stays: the row may name it)."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc

from control_plane.addresses import MemoryAddress, Scope
from control_plane.errors import SubjectErasureInProgress
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld


def test_an_append_for_a_subject_being_erased_is_refused_and_leaves_no_object(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-erasing", "log")
    with world.runtime.sessions() as session:
        memories.append_value(session, world.runtime.plane, world.actor, address, "first",
                              MemoryMeta())
    before = world.objects()
    job_id = world.erasing("u-erasing")
    with world.runtime.sessions() as session, \
            pytest.raises(SubjectErasureInProgress) as refused:
        memories.append_value(session, world.runtime.plane, world.actor, address, "second",
                              MemoryMeta())
    assert (refused.value.status_code, refused.value.extra) == (409, {"job_id": str(job_id)})
    assert len(before) == 1
    assert world.objects() == before
    assert world.read(address) == ["first"]


def test_an_append_whose_commit_loses_the_connection_raises_that_error_and_keeps_its_object(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-commit-lost", "log")
    with world.runtime.sessions() as session:
        memories.append_value(session, world.runtime.plane, world.actor, address, "first",
                              MemoryMeta())
    before = world.objects()
    with world.runtime.sessions() as session:
        lost = world.lose_commit(session)
        with pytest.raises(sa_exc.OperationalError) as raised:
            memories.append_value(session, world.runtime.plane, world.actor, address,
                                  "second", MemoryMeta())
    assert raised.value is lost
    after = world.objects()
    assert len(before) == 1 and before < after and len(after) == 2
    assert world.read(address) == ["first"]


@pytest.mark.databases("postgres")  # SQLite's one writer: the racing write could not commit
def test_an_append_whose_first_insert_meets_a_racing_first_write_appends_to_that_row(
        world: ServiceWorld) -> None:
    """Another writer creates the key between this append's put and its insert: the insert
    meets the unique index, the append deletes its object and starts over against the row
    that now exists."""
    address = MemoryAddress.parse(Scope.user, "u-first-race", "log")
    plane = world.runtime.plane
    raced: list[str] = []

    def at(step: str) -> None:
        if step == "write:after_put" and not raced:
            raced.append(step)
            with world.runtime.sessions() as other:
                memories.set_value(other, plane, world.actor, address, ["theirs"],
                                   MemoryMeta())

    plane.checkpoint = at
    with world.runtime.sessions() as session:
        pointer = memories.append_value(session, plane, world.actor, address, "mine",
                                        MemoryMeta())
    assert raced == ["write:after_put"]
    assert pointer.version == 2  # type: ignore[union-attr]
    assert world.read(address) == ["theirs", "mine"]
    assert world.objects() == {pointer.storage_path}  # type: ignore[union-attr]


def test_an_append_whose_row_keeps_changing_gives_up_after_four_looks(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each look finds the row other than the object would be sealed for (here: always);
    after four the append answers 409 and has put nothing."""
    from control_plane.errors import Conflict
    from control_plane.memories import write

    address = MemoryAddress.parse(Scope.user, "u-changing", "log")
    with world.runtime.sessions() as session:
        memories.append_value(session, world.runtime.plane, world.actor, address, "first",
                              MemoryMeta())
    before = world.objects()
    looks: list[int] = []

    def changed(*_: object) -> bool:
        looks.append(1)
        return False

    monkeypatch.setattr(write, "binds", changed)
    with world.runtime.sessions() as session, pytest.raises(Conflict) as refused:
        memories.append_value(session, world.runtime.plane, world.actor, address, "second",
                              MemoryMeta())
    assert refused.value.detail == ("the memory kept changing while it was being appended "
                                    "to; retry")
    assert len(looks) == 4
    assert world.objects() == before
    assert world.read(address) == ["first"]


def test_an_append_meeting_the_unique_index_again_on_its_second_try_gives_up(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second unique violation (the row created again, or a twin's idempotency key) with
    no first answer to replay: 409 after two tries, each try's object deleted."""
    from control_plane.errors import Conflict
    from control_plane.memories import write

    address = MemoryAddress.parse(Scope.user, "u-unique-again", "log")
    tries: list[int] = []

    def violated(*_: object) -> None:
        tries.append(1)
        raise sa_exc.IntegrityError("INSERT", {}, Exception("duplicate key value"))

    monkeypatch.setattr(write, "save", violated)
    with world.runtime.sessions() as session, pytest.raises(Conflict) as refused:
        memories.append_value(session, world.runtime.plane, world.actor, address, "item",
                              MemoryMeta())
    assert refused.value.detail == ("the memory was written concurrently by another "
                                    "request; retry")
    assert len(tries) == 2
    assert world.objects() == set()
