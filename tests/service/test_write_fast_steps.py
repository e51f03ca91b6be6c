"""The fast write path's steps (``memories/write_fast.py``) called as ``write.set_value`` and a
batch call them: the request a looked-up write commits (every field decided before step 3),
the binding its object is sealed for, what it remembers for the next write's guess, which
writes are guessed at all, and the transaction it does not hold across the put."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id
from control_plane.db.models import MemoryPointer, SubjectKey
from control_plane.errors import SubjectErasureInProgress
from control_plane.kit import sha256_hex
from control_plane.memories import guesses, hotpath, hotpath_commit, shared, write_fast
from control_plane.memories.schemas import MemoryMeta
from control_plane.memories.sealing import Binding
from control_plane.memories.shared import keyring_of
from control_plane.memories.write_request import WriteRequest
from control_plane.plane.data_plane import Target
from storage_adapters.local import LocalAdapter
from tests.support.service import ServiceWorld


def _target(world: ServiceWorld, session: Session, address: MemoryAddress) -> Target:
    return world.runtime.plane.for_memory(session, world.tenant_id, address.scope, None, None)




def _named(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        return set(session.scalars(select(MemoryPointer.storage_path).where(
            MemoryPointer.tenant_id == world.tenant_id)))


def _live_key(world: ServiceWorld, subject: tuple[str, str]) -> uuid.UUID:
    with world.runtime.sessions() as session:
        (key_id,) = session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_type == subject[0],
            SubjectKey.scope_ref == subject[1], SubjectKey.destroyed_at.is_(None))).all()
    return key_id


def _prepare(world: ServiceWorld, address: MemoryAddress, payload: bytes,
             meta: MemoryMeta) -> tuple[WriteRequest, Target]:
    """Steps 1–2 as a process that never saw the address nor its subject's key takes them."""
    guesses.forget_row(world.tenant_id, address)
    with world.runtime.sessions() as session:
        target = _target(world, session, address)
        request = write_fast.prepare_fast(session, world.runtime.plane, world.actor, address,
                                          target, payload, meta)
        assert not session.in_transaction()
    assert request is not None
    return request, target


def _commit(world: ServiceWorld, target: Target, request: WriteRequest
            ) -> tuple[MemoryPointer, tuple[uuid.UUID, str] | None]:
    with world.runtime.sessions() as session:
        outcome = hotpath_commit.commit_write(session, request)
    settled = write_fast.settle_fast(target, request, outcome)
    assert settled is not None
    return settled


def test_a_looked_up_write_commits_a_request_bound_to_the_row_and_its_subjects_key(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    first = world.write(address, 1)  # the general path: creates ada's key
    key_id = _live_key(world, ("user", "ada"))
    guesses.forget(world.tenant_id, address, ("user", "ada"))
    meta = MemoryMeta(tags=["b", "a", "b"], importance=4, title="T", ttl_seconds=60,
                      searchable=False)
    request, target = _prepare(world, address, b"2", meta)
    assert request.path in world.objects() - _named(world)  # stored, not yet named
    assert request.audit_address.startswith(" ") and len(request.audit_address) > 1
    expected = {
        "tenant_id": world.tenant_id, "address": address, "pointer_id": first.id,
        "seen_subject_user": "ada", "guard_user": "ada", "config_id": target.config_id,
        "sha256": sha256_hex(b"2"), "size": 1, "memory_type": None,
        "default_memory_type": "preference", "tags": ["b", "a"], "importance": 4,
        "title": "T", "meta_user": None, "agent_id": None,
        "expires_at": request.now + timedelta(seconds=60), "accessor_type": "api",
        "accessor_id": "test", "operation": "write", "accessor_agent_id": None,
        "key_id": key_id, "source": None, "searchable": False, "existed": True}
    assert {name: getattr(request, name) for name in expected} == expected
    # what it remembers: the subject's key for reads, the row and key for the next write
    assert shared.key_guess(world.tenant_id, address) == key_id
    assert guesses.guess(world.tenant_id, address, None, cheap_puts=False, encrypted=True) == (
        hotpath.WriteLookup(first.id, "ada", None, None), ("user", "ada"), key_id)

    pointer, superseded = _commit(world, target, request)
    assert (pointer.id, pointer.version, pointer.storage_path) == (first.id, 2, request.path)
    assert superseded == (first.storage_config_id, first.storage_path)
    assert world.read(address) == 2


def test_a_looked_up_new_row_is_guarded_for_its_scopes_user_and_not_remembered_early(
        world: ServiceWorld) -> None:
    world.write(MemoryAddress.parse(Scope.user, "ada", "a"), 1)
    key_id = _live_key(world, ("user", "ada"))
    address = MemoryAddress.parse(Scope.user, "ada", "b")
    request, target = _prepare(world, address, b"[3]", MemoryMeta())
    expected = {"seen_subject_user": None, "guard_user": "ada", "tags": None,
                "expires_at": None, "key_id": key_id, "searchable": None, "existed": False,
                "default_memory_type": "preference", "size": 3}
    assert {name: getattr(request, name) for name in expected} == expected
    assert request.pointer_id is not None
    # no row yet: on a bucket without cheap puts the next write must look up again
    assert guesses.guess(world.tenant_id, address, None, cheap_puts=False,
                         encrypted=True) is None
    pointer, superseded = _commit(world, target, request)
    assert (pointer.id, pointer.version, superseded) == (request.pointer_id, 1, None)
    assert world.read(address) == [3]


def test_a_rows_own_subject_guards_a_write_that_names_none(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.agent, "helper", "pref")
    row = world.write(address, 1, MemoryMeta(user_id="bo"))
    request, _ = _prepare(world, address, b"2", MemoryMeta())
    assert (request.pointer_id, request.seen_subject_user, request.guard_user,
            request.key_id, request.default_memory_type) == (
        row.id, "bo", "bo", _live_key(world, ("user", "bo")), "agent_memory")
    named, _ = _prepare(world, address, b"3", MemoryMeta(user_id="bo"))
    assert (named.guard_user, named.meta_user) == ("bo", "bo")


def test_bind_fast_seals_for_the_found_row_and_live_key_or_leaves_it_to_the_general_path(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    first = world.write(address, 1)
    plane, actor = world.runtime.plane, world.actor
    with world.runtime.sessions() as session:
        found = hotpath.lookup_for_write(session, world.tenant_id, address, None)
        session.commit()
    assert found.key is not None and found.key.wrapped_key is not None

    def bind(lookup: hotpath.WriteLookup) -> Binding | None:
        with world.runtime.sessions() as session:
            return write_fast.bind_fast(session, plane, actor, lookup)

    bound = bind(found)
    assert bound is not None and bound.key is not None
    assert (bound.pointer_id, bound.key.id, bound.key.subject, bound.key.key) == (
        first.id, found.key.id, ("user", "ada"), keyring_of(plane).cache.get(found.key.id))
    fresh = bind(dataclasses.replace(found, pointer_id=None))
    assert fresh is not None and fresh.key is not None
    assert fresh.pointer_id not in (None, first.id) and fresh.key.id == found.key.id
    # no live key (the general path creates one), or a key row without its wrapped key
    assert bind(dataclasses.replace(found, key=None)) is None
    assert bind(dataclasses.replace(
        found, key=dataclasses.replace(found.key, wrapped_key=None))) is None
    job = new_id()
    with pytest.raises(SubjectErasureInProgress) as refused:
        bind(dataclasses.replace(found, blocked_by=job))
    assert refused.value.extra == {"job_id": str(job)}
    # encryption off: the row's id, no key, whatever the lookup found
    monkeypatch.setattr(keyring_of(plane), "enabled", False)
    assert bind(found) == Binding(first.id, None)
    assert bind(dataclasses.replace(found, key=None)) == Binding(first.id, None)


def test_a_row_the_fast_path_saved_is_guessed_by_the_next_write(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    first = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(first, 1)  # looked up; the general path creates the key
    address = MemoryAddress.parse(Scope.user, "ada", "b")
    created = world.write(address, 2)  # a guessed new row
    again = world.write(address, 3)  # guessed: the row that commit saved
    assert lookups == [first]
    assert (again.id, again.version) == (created.id, 2)
    assert world.read(address) == 3
    assert world.objects() == _named(world)


def test_on_a_bucket_without_cheap_puts_only_a_known_address_is_guessed(
        world: ServiceWorld, lookups: list[MemoryAddress],
        monkeypatch: pytest.MonkeyPatch) -> None:
    known = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(known, 1)
    monkeypatch.delattr(LocalAdapter, "cheap_puts")  # as a cloud bucket's adapter
    new = MemoryAddress.parse(Scope.user, "ada", "b")
    world.write(new, 2)  # looked up first: a wrong guess would cost a put
    world.write(known, 3)
    world.write(new, 4)
    assert lookups == [known, new]
    assert (world.read(known), world.read(new)) == (3, 4)
    assert world.objects() == _named(world)


def test_a_guess_whose_key_the_keyring_no_longer_holds_is_looked_up(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(address, 1)
    key_id = _live_key(world, ("user", "ada"))
    keyring_of(world.runtime.plane).cache.forget([key_id])
    written = world.write(address, 2)
    assert lookups == [address, address]
    assert written.version == 2 and world.read(address) == 2
    assert world.objects() == _named(world)


@pytest.mark.parametrize("guessed", [True, False])
def test_no_transaction_is_held_across_the_put(world: ServiceWorld, guessed: bool) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(address, 1)
    if not guessed:  # nothing remembered of the row or the key: looked up
        guesses.forget(world.tenant_id, address, ("user", "ada"))
    steps: list[tuple[str, bool]] = []
    with world.runtime.sessions() as session:
        def record(step: str) -> None:
            if step.startswith("write:"):
                steps.append((step, session.in_transaction()))

        world.runtime.plane.checkpoint = record
        session.execute(select(MemoryPointer.id).limit(1))  # the request's earlier reads
        assert session.in_transaction()
        settled = write_fast.write_fast(session, world.runtime.plane, world.actor, address,
                                        b"2", MemoryMeta())
    world.runtime.plane.checkpoint = world.checkpoint
    assert settled is not None and settled[0].version == 2
    assert steps == [("write:after_lookup", False), ("write:after_put", False),
                     ("write:before_commit", False)]
