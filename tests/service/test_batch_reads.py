"""A batch's gets on PostgreSQL: the one lookup statement appends the read row of every get
whose subject key the server knows, as a single read's lookup does; the rest are audited by
one insert after they verify. Each get still leaves exactly the rows its single read would."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.identity import Caller
from control_plane.memories import service as memories
from control_plane.memories import shared
from control_plane.memories.batch import run_batch
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

pytestmark = pytest.mark.databases("postgres")


def _set(world: ServiceWorld, key: str, value: Any) -> MemoryPointer:
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor,
                                     MemoryAddress.parse(Scope.user, "u1", key), value,
                                     MemoryMeta())
    assert isinstance(pointer, MemoryPointer)
    return pointer


def _gets(world: ServiceWorld, *keys: str) -> list[dict[str, Any]]:
    caller = Caller(world.tenant_id, uuid.uuid4(), "admin", False)
    ops = [{"op": "get", "scope": "user", "scope_ref": "u1", "key": key} for key in keys]
    with world.runtime.sessions() as session:
        return run_batch(world.runtime.sessions, session, world.runtime.plane, caller, ops,
                         None).results


def _reads(world: ServiceWorld) -> list[tuple[Any, bool, str]]:
    with world.runtime.sessions() as session:
        return [(r.pointer_id, r.success, r.detail) for r in session.execute(
            select(AccessLog.pointer_id, AccessLog.success, AccessLog.detail)
            .where(AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "read")
            .order_by(AccessLog.id)).all()]


def _forget(world: ServiceWorld) -> None:
    """As if another server had written the memories: no key remembered for any address."""
    shared._KEYS.clear()


@pytest.fixture
def inserts(world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The pointer ids of each separate read-audit insert the batch made."""
    batcher = world.runtime.plane.audit_batcher
    assert batcher is not None
    calls: list[list[Any]] = []
    real = batcher.record_many

    def spy(tenant_id: Any, accessor_type: str, accessor_id: str, operation: str,
            rows: list[tuple[Any, str]], **kwargs: Any) -> None:
        calls.append([pointer_id for pointer_id, _ in rows])
        real(tenant_id, accessor_type, accessor_id, operation, rows, **kwargs)

    monkeypatch.setattr(batcher, "record_many", spy)
    return calls


def test_gets_of_known_addresses_are_audited_by_the_lookup_statement(
        world: ServiceWorld, inserts: list[list[Any]]) -> None:
    _set(world, "first", 0)  # creates u1's key (that write takes the general path)
    pointers = [_set(world, key, {"n": n}) for n, key in enumerate(("a", "b", "c"))]
    results = _gets(world, "a", "b", "c")
    assert [(r["status"], r["value"], r["pointer"]["id"]) for r in results] == [
        (200, {"n": n}, str(p.id)) for n, p in enumerate(pointers)]
    assert inserts == []  # the write taught the server each subject key: no second statement
    reads = _reads(world)
    assert [(r[0], r[1]) for r in reads] == [(p.id, True) for p in pointers]
    # Each row names its address sealed under the subject's key, as a single read's does.
    assert all(r[2].startswith("user sealed:") for r in reads)
    assert len({r[2] for r in reads}) == 3


def test_cold_addresses_are_audited_after_they_verify_and_then_become_known(
        world: ServiceWorld, inserts: list[list[Any]]) -> None:
    a, b, c = _set(world, "a", 1), _set(world, "b", 2), _set(world, "c", 3)
    _forget(world)
    cold = _gets(world, "a", "c")  # cold: audited by the insert
    assert [r["value"] for r in cold] == [1, 3]
    assert inserts == [[a.id, c.id]]
    results = _gets(world, "a", "b")  # a known now, b cold
    assert [(r["status"], r["value"]) for r in results] == [(200, 1), (200, 2)]
    assert inserts == [[a.id, c.id], [b.id]]
    assert [r["status"] for r in _gets(world, "a", "b")] == [200, 200]
    assert inserts == [[a.id, c.id], [b.id]]  # both known: the lookup logged both
    assert [(r[0], r[1]) for r in _reads(world)] == [
        (a.id, True), (c.id, True), (a.id, True), (b.id, True), (a.id, True), (b.id, True)]


def test_a_logged_get_whose_object_was_tampered_adds_its_failure_row_only(
        world: ServiceWorld, inserts: list[list[Any]]) -> None:
    _set(world, "first", 0)
    good, bad = _set(world, "good", "fine"), _set(world, "bad", "secret")
    with world.runtime.sessions() as session:
        target = world.runtime.plane.by_id(session, bad.storage_config_id)
    target.adapter.delete_many([bad.storage_path])
    target.adapter.put(bad.storage_path, b"tampered")
    results = _gets(world, "good", "bad")
    assert [(r["status"], r.get("error")) for r in results] == [
        (200, None), (409, "hash_mismatch")]
    assert inserts == []
    # The lookup wrote both read rows; the failed check appended its own, and no second
    # success row came from running the single read for it.
    reads = _reads(world)
    assert sorted((str(r[0]), r[1]) for r in reads[:2]) == sorted(
        [(str(good.id), True), (str(bad.id), True)])
    assert [(r[0], r[1]) for r in reads[2:]] == [(bad.id, False)]
    assert reads[2][2].startswith("hash_mismatch: ")


def test_a_known_address_deleted_or_missing_answers_404_with_no_success_row(
        world: ServiceWorld, inserts: list[list[Any]]) -> None:
    _set(world, "first", 0)
    kept = _set(world, "kept", 1)
    _set(world, "gone", 2)
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor,
                              MemoryAddress.parse(Scope.user, "u1", "gone"))
    results = _gets(world, "kept", "gone", "never")
    assert [(r["status"], r.get("detail")) for r in results] == [
        (200, None), (404, "no memory at user/u1 key=gone"),
        (404, "no memory at user/u1 key=never")]
    assert inserts == []
    reads = _reads(world)
    assert [(r[0], r[1]) for r in reads if r[1]] == [(kept.id, True)]
    # As a single read of each: a failure row with no pointer (the deleted one's row is gone).
    assert [(r[0], r[2].split(":")[0]) for r in reads if not r[1]] == [
        (None, "user not_found")] * 2
