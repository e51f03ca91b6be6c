"""The write protocol's general path (``memories/write_general.py``), taken as a set with an
Idempotency-Key takes it, on SQLite and PostgreSQL: the exact row a new write inserts (its
defaults, its data subject by scope) and what an update keeps, replaces and bumps; the expiry
an update does not inherit (at the boundary, under a fixed clock); the answer remembered for
the key and replayed; what the object is sealed under, and a write with encryption off; what
the process remembers for the next write (``guesses``)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import AccessLog, IdempotentResponse, MemoryPointer, SubjectKey
from control_plane.idempotency import Idempotency, Replay
from control_plane.memories import guesses, write_general
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.memories.shared import keyring_of
from storage_adapters import envelope
from tests.support.service import ServiceWorld

ROW = ("version", "memory_type", "tags", "importance", "source", "subject_user_id",
       "agent_id", "title", "expires_at", "storage_path", "content_sha256", "content_size",
       "sync_status", "searchable", "has_embeddings", "storage_class")


def general(world: ServiceWorld, address: MemoryAddress, value: Any,
            meta: MemoryMeta | None = None, key: str | None = None) -> Any:
    """A set with an Idempotency-Key (the fast path takes none): the general path."""
    idem = Idempotency.of(key or uuid.uuid4().hex, "set", address.describe())
    with world.runtime.sessions() as session:
        return memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                  meta or MemoryMeta(), idem)


def row(world: ServiceWorld, pointer_id: uuid.UUID) -> dict[str, Any]:
    with world.runtime.sessions() as session:
        pointer = session.get(MemoryPointer, pointer_id)
        assert pointer is not None
        return {name: getattr(pointer, name) for name in ROW}


def objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list(target.path("memories") + "/")}


def blob(world: ServiceWorld, path: str) -> bytes:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return target.adapter.get(path)


def live_key(world: ServiceWorld, scope_type: str, scope_ref: str) -> uuid.UUID:
    with world.runtime.sessions() as session:
        return session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_type == scope_type,
            SubjectKey.scope_ref == scope_ref, SubjectKey.destroyed_at.is_(None))).one()


def test_a_new_row_takes_the_defaults_and_an_update_replaces_what_it_names(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-rows", "k")
    first = general(world, address, {"a": 1})
    fresh = {"version": 1, "memory_type": "preference", "tags": [], "importance": 3,
             "source": "api", "subject_user_id": "u-rows", "agent_id": None, "title": None,
             "expires_at": None, "storage_path": first.storage_path,
             "content_sha256": hashlib.sha256(b'{"a":1}').hexdigest(), "content_size": 7,
             "sync_status": "synced", "searchable": True, "has_embeddings": False,
             "storage_class": None}
    assert row(world, first.id) == fresh
    assert first.created_at == first.updated_at

    named = MemoryMeta(memory_type="note", tags=["b", "a", "b"], importance=5, title="T",
                       user_id="u-other", agent_id="ag", source="chat", searchable=False,
                       ttl_seconds=60)
    second = general(world, address, [1, 2], named)
    assert second.id == first.id
    changed = fresh | {"version": 2, "memory_type": "note", "tags": ["b", "a"],
                       "importance": 5, "title": "T", "subject_user_id": "u-other",
                       "agent_id": "ag", "source": "chat", "searchable": False,
                       "expires_at": second.updated_at + timedelta(seconds=60),
                       "storage_path": second.storage_path,
                       "content_sha256": hashlib.sha256(b"[1,2]").hexdigest(),
                       "content_size": 5}
    assert row(world, first.id) == changed

    third = general(world, address, 7)  # names nothing: keeps every field but the value
    assert row(world, first.id) == changed | {
        "version": 3, "storage_path": third.storage_path,
        "content_sha256": hashlib.sha256(b"7").hexdigest(), "content_size": 1}
    assert objects(world) == {third.storage_path}  # the superseded objects went
    assert world.read(address) == 7
    with world.runtime.sessions() as session:
        details = list(session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.pointer_id == first.id,
            AccessLog.operation == "write").order_by(AccessLog.accessed_at)))
    ours, theirs = live_key(world, "user", "u-rows").hex, live_key(world, "user", "u-other").hex
    # each row's address sealed under the key its object is sealed under
    assert [d.split(" ")[:4] + d.split(" ")[4].split(":")[:2] for d in details] == [
        ["user", "v1", "7", "bytes", "sealed", ours],
        ["user", "v2", "5", "bytes", "sealed", theirs],
        ["user", "v3", "1", "bytes", "sealed", theirs]]
    assert envelope.read_header(blob(world, third.storage_path)).key_id.hex == theirs


def test_a_new_row_outside_a_user_scope_has_no_data_subject(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper-rows", "k")
    written = general(world, address, "x")
    assert (row(world, written.id)["subject_user_id"], row(world, written.id)["memory_type"]) \
        == (None, "agent_memory")
    # sealed under the agent scope's own key
    assert envelope.read_header(blob(world, written.storage_path)).key_id \
        == live_key(world, "agent", "helper-rows")


def test_the_answer_is_remembered_for_its_key_and_replayed(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-replay", "k")
    written = general(world, address, {"v": 1}, key="once")
    with world.runtime.sessions() as session:
        stored = session.scalars(select(IdempotentResponse).where(
            IdempotentResponse.tenant_id == world.tenant_id)).one()
        assert (stored.key, stored.status_code) == ("once", 200)
    again = general(world, address, {"v": 1}, key="once")
    assert isinstance(again, Replay) and again.status_code == 200
    assert (again.response["id"], again.response["version"], again.response["storage_path"]) \
        == (str(written.id), 1, written.storage_path)
    assert row(world, written.id)["version"] == 1


def test_an_update_does_not_inherit_an_expiry_that_ran_out_at_its_own_time(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    now = utcnow().replace(microsecond=0)
    ended, running = (MemoryAddress.parse(Scope.user, "u-ttl", key) for key in ("ended", "on"))
    for address, expires in ((ended, now), (running, now + timedelta(seconds=1))):
        written = world.write(address, 1)
        with world.runtime.sessions() as session:
            session.execute(update(MemoryPointer).where(MemoryPointer.id == written.id)
                            .values(expires_at=expires))
            session.commit()
    monkeypatch.setattr(write_general, "utcnow", lambda: now)
    assert general(world, ended, 2).expires_at is None
    assert general(world, running, 2).expires_at == now + timedelta(seconds=1)
    timed = general(world, running, 3, MemoryMeta(ttl_days=2))
    assert (timed.expires_at, timed.updated_at) == (now + timedelta(days=2), now)


def test_the_object_is_sealed_under_the_subject_the_row_keeps(world: ServiceWorld) -> None:
    """A row that names a data subject keeps it when a later write names none, and the
    later object is sealed under that subject's key, not the scope's."""
    address = MemoryAddress.parse(Scope.agent, "helper-subject", "pref")
    first = general(world, address, 1, MemoryMeta(user_id="u-kept"))
    second = general(world, address, 2)
    assert row(world, second.id)["subject_user_id"] == "u-kept"
    kept = live_key(world, "user", "u-kept")
    assert first.storage_path not in objects(world)  # superseded
    assert envelope.read_header(blob(world, second.storage_path)).key_id == kept
    assert world.read(address) == 2


def test_with_encryption_off_the_object_is_the_plaintext(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyring_of(world.runtime.plane), "enabled", False)
    address = MemoryAddress.parse(Scope.user, "u-plain", "k")
    first = general(world, address, {"p": 1})
    second = general(world, address, {"p": 2})
    assert (second.id, second.version) == (first.id, 2)
    assert blob(world, second.storage_path) == b'{"p":2}'
    assert objects(world) == {second.storage_path}
    assert world.read(address) == {"p": 2}
    with world.runtime.sessions() as session:
        keys = session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id)).all()
    assert keys == []  # no subject key made for a write that seals nothing


def test_the_process_remembers_the_row_and_key_a_general_write_saved(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-remembered", "k")
    written = general(world, address, 1)
    taken = guesses.guess(world.tenant_id, address, None, cheap_puts=False, encrypted=True)
    assert taken is not None
    found, subject, key_id = taken
    assert (found.pointer_id, found.subject_user_id) == (written.id, "u-remembered")
    assert (subject, key_id) == (("user", "u-remembered"), live_key(world, "user",
                                                                    "u-remembered"))
