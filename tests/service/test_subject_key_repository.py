"""The queries behind subject keys and KEK versions (``keys/repository.py``), on the real
databases: each one answers for its own tenant, its own subject and its own version only,
and reads what another session committed meanwhile, not what this session held before.

Rows are written straight into the tables (KEK versions, wrapped keys as opaque bytes), so
each query meets neighbours it must not answer for: another tenant's rows, the same scope
name under another scope type, a destroyed key of the same subject.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import KekVersion, MemoryEvent, MemoryPointer, SubjectKey
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.identity import Actor
from control_plane.keys import repository as repo
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.tenants.service import create_tenant
from tests.support.service import ServiceWorld

T0 = utcnow() - timedelta(days=3)


def _other_tenant(world: ServiceWorld) -> uuid.UUID:
    with world.runtime.sessions() as session:
        created, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    return created.id


def _kek(world: ServiceWorld, tenant_id: uuid.UUID, version: int, *,
         retired: bool = False) -> uuid.UUID:
    with world.runtime.sessions() as session:
        kek = KekVersion(id=uuid.uuid4(), tenant_id=tenant_id, version=version,
                         provider="local", key_ref=f"ref-{uuid.uuid4().hex}",
                         retired_at=T0 if retired else None)
        session.add(kek)
        session.commit()
        return kek.id


def _key(world: ServiceWorld, tenant_id: uuid.UUID, kek_id: uuid.UUID, scope_type: str,
         scope_ref: str, *, destroyed: bool = False) -> uuid.UUID:
    with world.runtime.sessions() as session:
        key = SubjectKey(id=uuid.uuid4(), tenant_id=tenant_id, scope_type=scope_type,
                         scope_ref=scope_ref, kek_version_id=kek_id,
                         wrapped_key=None if destroyed else b"wrapped " + uuid.uuid4().bytes,
                         destroyed_at=T0 if destroyed else None)
        session.add(key)
        session.commit()
        return key.id


def _row(world: ServiceWorld, key_id: uuid.UUID) -> tuple[str, str, uuid.UUID, bytes | None,
                                                          object, object]:
    with world.runtime.sessions() as session:
        key = session.get(SubjectKey, key_id)
        assert key is not None
        return (key.scope_type, key.scope_ref, key.kek_version_id, key.wrapped_key,
                key.rewrapped_at, key.destroyed_at)


def test_the_current_kek_the_version_list_and_the_next_version_are_the_tenants_own(
        world: ServiceWorld) -> None:
    a, b = world.tenant_id, _other_tenant(world)
    v1, v2, v7 = _kek(world, a, 1), _kek(world, a, 2), _kek(world, a, 7, retired=True)
    b5 = _kek(world, b, 5)
    with world.runtime.sessions() as session:
        current = repo.current_kek(session, a)
        assert current is not None and current.id == v2  # the highest version not retired
        other = repo.current_kek(session, b)
        assert other is not None and other.id == b5
        assert repo.current_kek(session, uuid.uuid4()) is None
        assert [k.id for k in repo.kek_versions(session, a)] == [v1, v2, v7]
        assert [k.id for k in repo.kek_versions(session, b)] == [b5]
        assert repo.next_kek_version(session, a) == 8  # after the retired 7 too
        assert repo.next_kek_version(session, b) == 6
        assert repo.next_kek_version(session, uuid.uuid4()) == 1


@dataclass
class Keys:
    a: uuid.UUID
    b: uuid.UUID
    kek_a: uuid.UUID
    kek_b: uuid.UUID
    live: uuid.UUID        # a: user/alice
    old: uuid.UUID         # a: user/alice, destroyed before
    conversation: uuid.UUID  # a: conversation/alice (same name, another scope type)
    bob: uuid.UUID         # a: user/bob
    b_alice: uuid.UUID     # b: user/alice


def _keys(world: ServiceWorld) -> Keys:
    a, b = world.tenant_id, _other_tenant(world)
    kek_a, kek_b = _kek(world, a, 1), _kek(world, b, 1)
    return Keys(a, b, kek_a, kek_b,
                live=_key(world, a, kek_a, "user", "alice"),
                old=_key(world, a, kek_a, "user", "alice", destroyed=True),
                conversation=_key(world, a, kek_a, "conversation", "alice"),
                bob=_key(world, a, kek_a, "user", "bob"),
                b_alice=_key(world, b, kek_b, "user", "alice"))


def test_a_subject_key_is_found_by_its_tenant_scope_and_name_or_by_id_in_its_tenant(
        world: ServiceWorld) -> None:
    k = _keys(world)
    with world.runtime.sessions() as session:
        found = repo.active_subject_key(session, k.a, "user", "alice")
        assert found is not None and found.id == k.live
        found = repo.active_subject_key(session, k.a, "conversation", "alice")
        assert found is not None and found.id == k.conversation
        found = repo.active_subject_key(session, k.b, "user", "alice")
        assert found is not None and found.id == k.b_alice
        assert repo.active_subject_key(session, k.a, "user", "carol") is None
        by_id = repo.subject_key(session, k.a, k.old)
        assert by_id is not None and by_id.id == k.old and by_id.destroyed_at is not None
        assert repo.subject_key(session, k.b, k.live) is None  # another tenant's id
        assert repo.subject_key(session, k.a, uuid.uuid4()) is None
        assert repo.live_key_ids(session, k.a, [k.live, k.old, k.bob, k.b_alice,
                                                uuid.uuid4()]) == {k.live, k.bob}
        assert repo.live_key_ids(session, k.b, [k.live, k.b_alice]) == {k.b_alice}


def test_lookups_read_what_another_session_committed_after_this_one_loaded_the_key(
        world: ServiceWorld) -> None:
    """Sessions keep their objects across commits; a key row re-wrapped or destroyed
    elsewhere (a rotation, an erasure on another replica) must not be answered stale."""
    k = _keys(world)
    kek_new = _kek(world, k.a, 2)
    kek_newest = _kek(world, k.a, 3)
    with world.runtime.sessions() as held:
        first = repo.active_subject_key(held, k.a, "user", "alice")
        assert first is not None and first.kek_version_id == k.kek_a
        older = repo.wrapped_by_older(held, k.a, kek_newest, 10)
        assert [row.kek_version_id for row in older] == [k.kek_a] * 3
        held.commit()
        with world.runtime.sessions() as other:
            for key_id in (k.live, k.conversation):
                key = repo.subject_key(other, k.a, key_id)
                assert key is not None
                assert repo.rewrap(other, key, k.kek_a, kek_new, b"re-wrapped", utcnow())
            other.commit()
        again = repo.active_subject_key(held, k.a, "user", "alice")
        assert again is first and again.kek_version_id == kek_new
        assert again.wrapped_key == b"re-wrapped"
        older = repo.wrapped_by_older(held, k.a, kek_newest, 10)
        assert {row.id: (row.kek_version_id, row.wrapped_key) for row in older
                if row.id != k.bob} == {k.live: (kek_new, b"re-wrapped"),
                                        k.conversation: (kek_new, b"re-wrapped")}
        held.commit()
        with world.runtime.sessions() as other:
            assert repo.destroy_subject(other, k.a, "user", "alice", utcnow()) == 1
            other.commit()
        gone = repo.subject_key(held, k.a, k.live)
        assert gone is first and gone.wrapped_key is None and gone.destroyed_at is not None


def test_keys_wrapped_by_older_versions_are_listed_in_id_order_up_to_the_limit(
        world: ServiceWorld) -> None:
    k = _keys(world)
    current = _kek(world, k.a, 2)
    under_current = _key(world, k.a, current, "user", "dave")
    older = sorted([k.live, k.conversation, k.bob])
    with world.runtime.sessions() as session:
        assert [r.id for r in repo.wrapped_by_older(session, k.a, current, 10)] == older
        assert [r.id for r in repo.wrapped_by_older(session, k.a, current, 2)] == older[:2]
        assert [r.id for r in repo.wrapped_by_older(session, k.b, k.kek_b, 10)] == []
        assert [r.id for r in repo.wrapped_by_older(session, k.a, k.kek_a, 10)] == [
            under_current]
        assert repo.keys_per_version(session, k.a) == {k.kek_a: 3, current: 1}
        assert repo.keys_per_version(session, k.b) == {k.kek_b: 1}


def test_a_rewrap_swaps_only_that_key_and_only_from_the_version_it_was_read_under(
        world: ServiceWorld) -> None:
    k = _keys(world)
    new = _kek(world, k.a, 2)
    before_bob = _row(world, k.bob)
    now = utcnow()
    with world.runtime.sessions() as session:
        live = repo.subject_key(session, k.a, k.live)
        old = repo.subject_key(session, k.a, k.old)
        assert live is not None and old is not None
        assert repo.rewrap(session, live, k.kek_a, new, b"under v2", now) is True
        # Read under version 1, but another rotation moved it already: no swap.
        assert repo.rewrap(session, live, k.kek_a, new, b"stale", now) is False
        assert repo.rewrap(session, old, k.kek_a, new, b"shredded", now) is False
        session.commit()
    assert _row(world, k.live) == ("user", "alice", new, b"under v2", now, None)
    assert _row(world, k.old)[2:] == (k.kek_a, None, None, T0)
    assert _row(world, k.bob) == before_bob


def test_destroying_a_subject_shreds_its_live_key_and_nothing_else(world: ServiceWorld) -> None:
    k = _keys(world)
    untouched = {key_id: _row(world, key_id) for key_id in
                 (k.old, k.conversation, k.bob, k.b_alice)}
    now = utcnow()
    with world.runtime.sessions() as session:
        assert repo.destroy_subject(session, k.a, "user", "alice", now) == 1
        session.commit()
    assert _row(world, k.live)[3:] == (None, None, now)
    assert {key_id: _row(world, key_id) for key_id in untouched} == untouched
    with world.runtime.sessions() as session:
        assert repo.destroy_subject(session, k.a, "user", "alice", utcnow()) == 0
        session.commit()
    assert _row(world, k.live)[3:] == (None, None, now)


def _memory(world: ServiceWorld, tenant_id: uuid.UUID, scope: Scope, ref: str) -> None:
    actor = Actor(tenant_id, "api", "test")
    with world.runtime.sessions() as session:
        written = memories.set_value(session, world.runtime.plane, actor,
                                     MemoryAddress.parse(scope, ref, "k"), {"v": 1},
                                     MemoryMeta(user_id="alice"))
    assert isinstance(written, MemoryPointer)


def _event(world: ServiceWorld, ref: str) -> None:
    spec = EventIn.model_validate({"scope": "conversation", "scope_ref": ref,
                                   "kind": "call_summary", "body": "talked", "user_id": "alice"})
    with world.runtime.sessions() as session:
        assert isinstance(events.append_event(session, world.runtime.plane, world.actor, spec),
                          MemoryEvent)


def _scope_keys(session: Session, tenant_id: uuid.UUID) -> dict[uuid.UUID, tuple[str, str]]:
    return {row.id: (row.scope_type, row.scope_ref) for row in session.scalars(
        select(SubjectKey).where(SubjectKey.tenant_id == tenant_id))}


def test_retiring_a_subjects_scopes_shreds_and_renames_the_unused_ones_of_that_tenant(
        world: ServiceWorld) -> None:
    a, b = world.tenant_id, _other_tenant(world)
    _memory(world, a, Scope.conversation, "c-mem")      # in use by a memory
    _event(world, "c-evt")                              # in use by an event
    _memory(world, a, Scope.agent, "c-typed")           # the name in use, in another scope type
    _memory(world, b, Scope.conversation, "c-other")    # the name in use, in another tenant
    with world.runtime.sessions() as session:
        kek_a, kek_b = repo.current_kek(session, a), repo.current_kek(session, b)
        assert kek_a is not None and kek_b is not None
        service_keys = _scope_keys(session, a)
        b_before = _scope_keys(session, b)
    in_use = [_key(world, a, kek_a.id, "conversation", ref) for ref in ("c-mem", "c-evt")]
    free = _key(world, a, kek_a.id, "conversation", "c-free")
    free_old = _key(world, a, kek_a.id, "conversation", "c-free", destroyed=True)
    other = _key(world, a, kek_a.id, "conversation", "c-other")
    typed = _key(world, a, kek_a.id, "conversation", "c-typed")
    user_free = _key(world, a, kek_a.id, "user", "c-free")
    b_free = _key(world, b, kek_b.id, "conversation", "c-free")
    keep = {key_id: _row(world, key_id) for key_id in [*service_keys, *in_use, user_free,
                                                       b_free]}
    refs = ["c-mem", "c-evt", "c-free", "c-other", "c-typed"]
    now = utcnow()
    with world.runtime.sessions() as session:
        assert repo.retire_scopes(session, a, "conversation", [], "h-alice", now) == 0
        assert repo.retire_scopes(session, a, "conversation", ["c-mem", "c-evt"], "h-alice",
                                  now) == 0
        assert repo.retire_scopes(session, a, "conversation", refs, "h-alice", now) == 4
        session.commit()
    assert {key_id: _row(world, key_id) for key_id in keep} == keep
    assert list(service_keys.values()) == [("user", "alice")]  # the writes' subject
    for key_id in (free, other, typed):
        assert _row(world, key_id)[1:] == ("h-alice", kek_a.id, None, None, now)
    assert _row(world, free_old)[1:] == ("h-alice", kek_a.id, None, None, T0)
    with world.runtime.sessions() as session:
        assert _scope_keys(session, b) == {**b_before, b_free: ("conversation", "c-free")}


def test_a_kek_is_live_until_retired_and_unknown_ids_are_not(world: ServiceWorld) -> None:
    live, retired = _kek(world, world.tenant_id, 1), _kek(world, world.tenant_id, 2,
                                                           retired=True)
    with world.runtime.sessions() as session:
        assert repo.kek_still_live(session, live) is True
        assert repo.kek_still_live(session, retired) is False
        assert repo.kek_still_live(session, uuid.uuid4()) is False


def _no_waiting(session: Session) -> None:
    session.execute(text("SET LOCAL lock_timeout = '1s'"))


@pytest.mark.databases("postgres")
def test_keys_being_added_share_a_kek_and_a_retirement_locks_out_only_its_tenants(
        world: ServiceWorld) -> None:
    """``kek_still_live`` holds the version FOR SHARE: two writers adding keys under one KEK
    do not wait for each other, but a retirement (``lock_kek_versions``) holds every version
    of its tenant, and only of its tenant, until it ends."""
    a, b = world.tenant_id, _other_tenant(world)
    kek_a, kek_b = _kek(world, a, 1), _kek(world, b, 1)
    with world.runtime.sessions() as first, world.runtime.sessions() as second:
        assert repo.kek_still_live(first, kek_a) is True
        _no_waiting(second)
        assert repo.kek_still_live(second, kek_a) is True
        first.rollback()
        second.rollback()
        repo.lock_kek_versions(first, a)
        _no_waiting(second)
        assert repo.kek_still_live(second, kek_b) is True
        second.rollback()
        _no_waiting(second)
        with pytest.raises(OperationalError, match="lock"):
            repo.kek_still_live(second, kek_a)
        second.rollback()
        first.rollback()
