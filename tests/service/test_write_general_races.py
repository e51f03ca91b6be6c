"""The general write path (``memories/write_general.py``) when something changes between its
put and its commit, forced at its own step after the put (``write:general_after_put``: no
transaction open), on SQLite and PostgreSQL: a first write of the row by another request, the
row's data subject changed, the subject's key destroyed — each time the object is sealed and
put again for what the row is now, and the first one is gone; a row that keeps changing gives
up after three tries; a twin request with the same Idempotency-Key that commits first is
replayed after three tries; and the failures after the put: a refusal deletes the object, a
commit whose outcome is unknown keeps it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer, SubjectKey
from control_plane.errors import Conflict, SubjectErasureInProgress
from control_plane.idempotency import Idempotency, Replay
from control_plane.memories import service as memories
from control_plane.memories import write_general
from control_plane.memories.schemas import MemoryMeta
from storage_adapters import envelope
from tests.support.service import ServiceWorld


def _general(world: ServiceWorld, address: MemoryAddress, value: Any,
             idem: Idempotency | None = None) -> Any:
    idem = idem or Idempotency.of(uuid.uuid4().hex, "set", address.describe())
    with world.runtime.sessions() as session:
        return memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                  MemoryMeta(), idem)




def _puts(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return int(target.adapter.stats.counts.get("put", 0))


def _key_of(world: ServiceWorld, path: str) -> uuid.UUID:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return envelope.read_header(target.adapter.get(path)).key_id


def _live_keys(world: ServiceWorld, scope_ref: str) -> list[uuid.UUID]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_ref == scope_ref,
            SubjectKey.destroyed_at.is_(None))))


def _after_put_once(world: ServiceWorld, before: set[str],
                    action: Callable[[], None]) -> list[str]:
    """Run ``action`` at the first ``write:general_after_put``; the answer holds the path
    the write had put then."""
    seen: list[str] = []

    def at(step: str) -> None:
        if step == "write:general_after_put" and not seen:
            (put,) = world.objects() - before
            seen.append(put)
            action()

    world.runtime.plane.checkpoint = at
    return seen


def test_a_first_write_by_another_request_meanwhile_is_updated_by_an_object_sealed_for_it(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-first", "k")
    theirs: list[MemoryPointer] = []
    seen = _after_put_once(world, set(), lambda: theirs.append(world.write(address, "theirs")))
    mine = _general(world, address, "mine")
    [first_put], [other] = seen, theirs
    assert (mine.id, mine.version) == (other.id, 2)  # their row, not the id it was sealed for
    assert first_put not in {mine.storage_path, other.storage_path}
    assert world.objects() == {mine.storage_path}
    assert world.read(address) == "mine"


def test_a_data_subject_changed_meanwhile_gets_the_object_sealed_under_its_key(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper-race", "pref")
    world.write(MemoryAddress.parse(Scope.user, "u-new", "warm"), 0)  # u-new's key exists
    old = world.write(address, 1)
    before = world.objects()

    def tag_with_u_new() -> None:
        with world.runtime.sessions() as session:
            session.execute(update(MemoryPointer).where(MemoryPointer.id == old.id)
                            .values(subject_user_id="u-new"))
            session.commit()

    seen = _after_put_once(world, before, tag_with_u_new)
    written = _general(world, address, 2)
    assert (written.id, written.version, written.subject_user_id) == (old.id, 2, "u-new")
    assert _key_of(world, written.storage_path) == _live_keys(world, "u-new")[0]
    assert seen[0] != written.storage_path
    assert world.objects() == before - {old.storage_path} | {written.storage_path}
    assert world.read(address) == 2


def test_a_subject_key_destroyed_meanwhile_is_not_sealed_under(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-shred", "k")
    old = world.write(address, 1)
    [old_key] = _live_keys(world, "u-shred")
    before = world.objects()

    def destroy() -> None:
        with world.runtime.sessions() as session:
            session.execute(update(SubjectKey).where(SubjectKey.id == old_key)
                            .values(destroyed_at=utcnow(), wrapped_key=None))
            session.commit()

    seen = _after_put_once(world, before, destroy)
    written = _general(world, address, 2)
    [new_key] = _live_keys(world, "u-shred")
    assert new_key != old_key
    assert _key_of(world, written.storage_path) == new_key
    assert (written.id, written.version) == (old.id, 2)
    assert seen[0] != written.storage_path
    assert world.objects() == {written.storage_path}
    assert world.read(address) == 2


def test_a_row_that_keeps_changing_gives_up_after_three_tries(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every look under the lock finds the row other than the object was sealed for (here:
    always): three objects put, each deleted, then 409 with the sentence."""
    address = MemoryAddress.parse(Scope.user, "u-changing", "k")
    old = world.write(address, 1)
    before, puts = world.objects(), _puts(world)
    looks: list[int] = []

    def changed(*_: object) -> bool:
        looks.append(1)
        return False

    monkeypatch.setattr(write_general, "binds", changed)
    with pytest.raises(Conflict) as refused:
        _general(world, address, 2)
    assert refused.value.detail == ("the memory kept changing while it was being written; "
                                    "retry")
    assert (len(looks), _puts(world) - puts) == (3, 3)
    assert world.objects() == before
    with world.runtime.sessions() as session:
        pointer = session.get(MemoryPointer, old.id)
        assert pointer is not None
        assert (pointer.version, pointer.storage_path) == (1, old.storage_path)
    assert world.read(address) == 1


def test_a_twin_that_commits_first_is_replayed_after_three_tries(world: ServiceWorld) -> None:
    """A request with the same Idempotency-Key commits between this one's put and its
    commit: each commit meets the twin's remembered answer (a unique violation), three
    times, then the twin's answer is replayed and this request's object deleted."""
    address = MemoryAddress.parse(Scope.user, "u-twin", "k")
    world.write(address, 0)
    idem = Idempotency.of("twin-key", "set", "u-twin/k")
    twins: list[MemoryPointer] = []
    started: list[str] = []
    saves: list[str] = []

    def at(step: str) -> None:
        if step == "write:general_after_put" and not started:
            started.append(step)  # the twin passes this step too
            with world.runtime.sessions() as other:
                twin = memories.set_value(other, world.runtime.plane, world.actor, address,
                                          "twin", MemoryMeta(), idem)
            assert isinstance(twin, MemoryPointer)
            twins.append(twin)
        elif step == "write:after_put" and twins:
            saves.append(step)

    world.runtime.plane.checkpoint = at
    puts = _puts(world)
    answer = _general(world, address, "twin", idem)
    [twin] = twins
    assert isinstance(answer, Replay) and answer.status_code == 200
    assert (answer.response["id"], answer.response["version"],
            answer.response["storage_path"]) == (str(twin.id), 2, twin.storage_path)
    assert len(saves) == 3
    assert _puts(world) - puts == 2  # this request's one object, and the twin's
    assert world.objects() == {twin.storage_path}
    with world.runtime.sessions() as session:
        pointer = session.get(MemoryPointer, twin.id)
        assert pointer is not None and pointer.version == 2


def test_a_commit_that_loses_the_connection_raises_that_error_and_keeps_its_object(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-lost", "k")
    world.write(address, 1)
    before = world.objects()
    with world.runtime.sessions() as session:
        lost = world.lose_commit(session)
        with pytest.raises(sa_exc.OperationalError) as raised:
            memories.set_value(session, world.runtime.plane, world.actor, address, 2,
                               MemoryMeta(), Idempotency.of("lost", "set", "u-lost/k"))
    assert raised.value is lost
    after = world.objects()
    assert len(before) == 1 and before < after and len(after) == 2  # the row may name it
    assert world.read(address) == 1


def test_a_write_for_a_subject_being_erased_is_refused_and_leaves_no_object(
        world: ServiceWorld) -> None:
    """The erasure of a ``user`` scope's user refuses a write there even when the memory
    names another subject; a conversation whose ref is that user id is not the user's."""
    mine = MemoryAddress.parse(Scope.user, "u-ref", "k")
    shared = MemoryAddress.parse(Scope.conversation, "u-ref", "k")
    world.write(mine, 1, MemoryMeta(user_id="u-meta"))
    before = world.objects()
    job_id = world.erasing("u-ref")
    with pytest.raises(SubjectErasureInProgress) as refused:
        _general(world, mine, 2)
    assert (refused.value.status_code, refused.value.extra) == (409, {"job_id": str(job_id)})
    assert world.objects() == before
    assert world.read(mine) == 1

    written = _general(world, shared, 3)
    assert (written.version, written.subject_user_id) == (1, None)
    assert world.objects() == before | {written.storage_path}
    assert world.read(shared) == 3
