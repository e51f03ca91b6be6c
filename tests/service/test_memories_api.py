"""The memories domain's public write/delete API (``memories.api``), which entries, events
and retention build on, on SQLite and PostgreSQL: each step keeps the promise its docstring
makes — the size check's refusal, the replayed first answer, the key check, the uncertain
commit, the superseded object's delete, and finishing deletes (objects, rows, audit)."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import func, select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.audit import service as audit
from control_plane.db.base import new_id, utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, MemoryPointer, SubjectKey
from control_plane.entries import service as entries
from control_plane.entries.schemas import EntryIn
from control_plane.errors import PayloadTooLarge
from control_plane.idempotency import Idempotency, IdempotencyKeyReused, Replay
from control_plane.keys import subject_keys as keys
from control_plane.memories import service as memories
from control_plane.memories.api import (
    CommitUncertain,
    after_commit,
    check_size,
    commit_or_uncertain,
    delete_quietly,
    finish_deletes,
    key_destroyed,
    replay_of,
    serialise,
)
from control_plane.memories.schemas import MemoryMeta, pointer_json
from control_plane.memories.shared import keyring_of
from control_plane.plane.data_plane import Target
from storage_adapters import base as storage
from tests.support.service import ServiceWorld

META = MemoryMeta()
TOO_LARGE = ("the stored value would be {size} bytes, over this server's limit of {limit} "
             "bytes per memory (MEMPLANE_MAX_OBJECT_BYTES); keep the value smaller, or start "
             "a new key instead of appending to this one")


def _set(world: ServiceWorld, address: MemoryAddress, value: Any,
         idem: Idempotency | None = None) -> MemoryPointer | Replay:
    with world.runtime.sessions() as session:
        return memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                  META, idem)


def _written(world: ServiceWorld, address: MemoryAddress, value: Any) -> MemoryPointer:
    pointer = _set(world, address, value)
    assert isinstance(pointer, MemoryPointer)
    return pointer


def _target(world: ServiceWorld) -> Target:
    with world.runtime.sessions() as session:
        return world.runtime.plane.active(session, world.tenant_id)


def _objects(world: ServiceWorld) -> set[str]:
    target = _target(world)
    return {info.path for info in target.adapter.list(target.path("memories") + "/")}


def _audit(world: ServiceWorld, operation: str) -> list[tuple[uuid.UUID | None, str]]:
    with world.runtime.sessions() as session:
        return sorted(((row.pointer_id, row.detail) for row in session.execute(
            select(AccessLog.pointer_id, AccessLog.detail).where(
                AccessLog.tenant_id == world.tenant_id, AccessLog.operation == operation))),
            key=str)


def _rows(world: ServiceWorld) -> dict[uuid.UUID, tuple[str, str]]:
    with world.runtime.sessions() as session:
        return {row.id: (row.sync_status, row.storage_path) for row in session.execute(
            select(MemoryPointer.id, MemoryPointer.sync_status, MemoryPointer.storage_path)
            .where(MemoryPointer.tenant_id == world.tenant_id))}


def test_check_size_refuses_a_value_over_the_limit_with_its_sentence(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    plane = world.runtime.plane
    monkeypatch.setattr(plane, "max_object_bytes", 10)
    check_size(plane, 10)  # at the limit: stored
    with pytest.raises(PayloadTooLarge) as refused:
        check_size(plane, 11)
    assert (refused.value.status_code, refused.value.code, refused.value.detail) == (
        413, "payload_too_large", TOO_LARGE.format(size=11, limit=10))
    monkeypatch.setattr(plane, "max_object_bytes", None)
    check_size(plane, 10**12)  # no limit configured


def test_a_memory_and_an_entry_over_the_limit_are_refused_alike_and_store_nothing(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(world.runtime.plane, "max_object_bytes", 20)
    value = "x" * 19  # 21 bytes once serialised, with its quotes
    assert len(serialise(value)) == 21
    with pytest.raises(PayloadTooLarge) as memory:
        _set(world, MemoryAddress.parse(Scope.user, "u-size", "k"), value)
    with world.runtime.sessions() as session, pytest.raises(PayloadTooLarge) as entry:
        entries.create_entry(session, world.runtime.plane, world.actor, EntryIn(
            scope="entity", scope_ref="e-size", title="t", summary=value))
    assert memory.value.detail == entry.value.detail == TOO_LARGE.format(size=21, limit=20)
    assert _rows(world) == {}
    assert _objects(world) == set()


def test_replay_of_answers_a_retried_write_with_the_first_answer(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-idem", "k")
    idem = Idempotency("retry-1", "fingerprint")
    with world.runtime.sessions() as session:
        assert replay_of(session, world.actor, None) is None
        assert replay_of(session, world.actor, idem) is None  # a key not seen yet
    assert _audit(world, "replay") == []

    first = _written_with(world, address, "first", idem)
    with world.runtime.sessions() as session:
        replay = replay_of(session, world.actor, idem)
        assert not session.in_transaction()  # rolled back, its audit row committed
    assert replay == Replay(200, pointer_json(first))
    assert _audit(world, "replay") == [
        (first.id, "idempotency key answered from the first request")]

    again = _set(world, address, "second", idem)  # the retried request: nothing written
    assert again == replay
    assert world.read(address) == "first"
    assert len(_audit(world, "replay")) == 2
    with world.runtime.sessions() as session, pytest.raises(IdempotencyKeyReused):
        replay_of(session, world.actor, Idempotency("retry-1", "another request"))


def _written_with(world: ServiceWorld, address: MemoryAddress, value: Any,
                  idem: Idempotency) -> MemoryPointer:
    pointer = _set(world, address, value, idem)
    assert isinstance(pointer, MemoryPointer)
    return pointer


def test_key_destroyed_once_an_erasure_destroyed_the_subject_key(world: ServiceWorld) -> None:
    ring = keyring_of(world.runtime.plane)
    with world.runtime.sessions() as session:
        handle = keys.key_for_write(session, ring, world.tenant_id, ("user", "u-erased"))
        assert key_destroyed(session, None) is False  # encryption off: no key to check
        assert key_destroyed(session, handle) is False
        session.rollback()
        begin_write(session)
        session.execute(update(SubjectKey).where(SubjectKey.id == handle.id)
                        .values(destroyed_at=utcnow(), wrapped_key=None))
        session.commit()
        assert key_destroyed(session, handle) is True
        session.rollback()


def test_commit_or_uncertain_commits_or_says_the_outcome_is_unknown(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    with world.runtime.sessions() as session:
        begin_write(session)
        audit.record(session, world.actor, "probe", detail="committed")
        commit_or_uncertain(session)
    assert _audit(world, "probe") == [(None, "committed")]

    lost = sa_exc.OperationalError("COMMIT", {}, Exception("server closed the connection"))

    def dropped() -> None:
        raise lost

    with world.runtime.sessions() as session:
        monkeypatch.setattr(session, "commit", dropped)
        with pytest.raises(CommitUncertain) as uncertain:
            commit_or_uncertain(session)
        monkeypatch.undo()
        session.rollback()
    assert uncertain.value.original is lost


def test_after_commit_deletes_only_the_superseded_object(world: ServiceWorld) -> None:
    pointer = _written(world, MemoryAddress.parse(Scope.user, "u-after", "k"), 1)
    target = _target(world)
    old = target.path("memories", "user", "u-after", "k", f"{new_id().hex}.json")
    target.adapter.put(old, b"superseded")
    with world.runtime.sessions() as session:
        assert after_commit(session, world.runtime.plane, (pointer, None)) is pointer
        assert old in _objects(world)  # a new pointer superseded nothing
        assert after_commit(session, world.runtime.plane,
                            (pointer, (target.config_id, old))) is pointer
    assert _objects(world) == {pointer.storage_path}


class _Unreachable:
    """A bucket whose deletes fail as an unreachable backend's do; the rest is the real
    adapter's."""

    def __init__(self, adapter: storage.StorageAdapter) -> None:
        self.adapter = adapter

    def delete_many(self, paths: list[str]) -> None:
        raise storage.StorageUnavailable("the bucket is down")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)


def test_delete_quietly_leaves_what_it_could_not_delete_to_orphan_gc(
        world: ServiceWorld, caplog: pytest.LogCaptureFixture) -> None:
    target = _target(world)
    path = target.path("memories", "user", "u-quiet", "k", f"{new_id().hex}.json")
    target.adapter.put(path, b"orphan")
    down = dataclasses.replace(target, adapter=_Unreachable(target.adapter))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="control_plane.memories.api"):
        delete_quietly(down, [path])  # no error
    assert [r.getMessage() for r in caplog.records] == [
        "could not delete 1 superseded object(s); orphan GC will"]
    assert path in _objects(world)
    delete_quietly(target, [path])
    assert path not in _objects(world)


@pytest.mark.parametrize("detail", [None, "cleanup"])
def test_finish_deletes_removes_the_objects_and_the_rows_still_pending(
        world: ServiceWorld, detail: str | None) -> None:
    a, b, c = (_written(world, MemoryAddress.parse(Scope.user, "u-fin", key), key)
               for key in "abc")
    target = _target(world)
    vector = a.storage_path.removesuffix(".json") + ".vec"
    target.adapter.put(vector, b"a's search vector")
    rewritten = target.path("memories", "user", "u-fin", "c", f"{new_id().hex}.json")
    target.adapter.put(rewritten, b"c written again")
    with world.runtime.sessions() as session:
        begin_write(session)
        session.execute(update(MemoryPointer).where(MemoryPointer.id == a.id)
                        .values(embedding_storage_path=vector))
        session.execute(update(MemoryPointer).where(MemoryPointer.id.in_([a.id, b.id, c.id]))
                        .values(sync_status="pending_delete"))
        session.commit()
        marked = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.id.in_([a.id, b.id, c.id])).order_by(MemoryPointer.key)))
        session.commit()
        with world.runtime.sessions() as other:  # c is written again after its mark
            begin_write(other)
            other.execute(update(MemoryPointer).where(MemoryPointer.id == c.id)
                          .values(sync_status="synced", storage_path=rewritten))
            other.commit()

        counted: list[tuple[int, bool]] = []

        def before_commit(removed: int) -> None:
            counted.append((removed, session.in_transaction()))

        removed = finish_deletes(session, world.runtime.plane, world.actor, marked, "delete",
                                 detail=detail, before_commit=before_commit)
        assert not session.in_transaction()
    assert (removed, counted) == (2, [(2, True)])
    assert _rows(world) == {c.id: ("synced", rewritten)}
    assert _objects(world) == {rewritten}  # a's value and vector, b's and c's old one gone
    deleted = {p.id: detail or f"user v{p.version}" for p in (a, b, c)}
    assert _audit(world, "delete") == sorted(deleted.items(), key=str)


def test_finish_deletes_of_nothing_removes_nothing(world: ServiceWorld) -> None:
    kept = _written(world, MemoryAddress.parse(Scope.user, "u-none", "k"), 1)
    with world.runtime.sessions() as session:
        assert finish_deletes(session, world.runtime.plane, world.actor, [], "delete") == 0
        count = session.scalar(select(func.count()).select_from(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id))
    assert count == 1
    assert _objects(world) == {kept.storage_path}
