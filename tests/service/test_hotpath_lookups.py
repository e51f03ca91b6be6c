"""The hot path's lookups (``memories/hotpath.py``), called as the write and read paths call
them, on SQLite and PostgreSQL, next to a second tenant holding the same addresses and
subjects: each answer is the exact row, subject and live key of the caller's tenant; a
destroyed key is no live key; a running erasure of the subject (and only of the caller's
tenant) blocks a write; what the session had pending is committed before the lookup; the read
lookup that writes its own audit row (PostgreSQL) writes exactly that row, only for the key the
caller expected."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id, utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, MemoryPointer, SubjectErasure, SubjectKey
from control_plane.identity import Actor
from control_plane.memories import hotpath
from control_plane.memories import service as memories
from control_plane.memories.hotpath import KeyRow, ReadRow, WriteLookup
from control_plane.memories.schemas import MemoryMeta
from control_plane.tenants.service import create_tenant
from tests.support.service import ServiceWorld

MINE = MemoryAddress.parse(Scope.user, "u1", "k")
AGENTS = MemoryAddress.parse(Scope.agent, "a1", "k")  # its subject: u2
APPS = MemoryAddress.parse(Scope.app, "app1", "k")  # no subject: the scope's key


def _other_tenant(world: ServiceWorld) -> uuid.UUID:
    with world.runtime.sessions() as session:
        created, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    return created.id


def _save(world: ServiceWorld, tenant_id: uuid.UUID, address: MemoryAddress,
          user: str | None = None) -> MemoryPointer:
    with world.runtime.sessions() as session:
        saved = memories.set_value(session, world.runtime.plane, Actor(tenant_id, "api", "t"),
                                   address, {"v": 1}, MemoryMeta(user_id=user))
    assert isinstance(saved, MemoryPointer)
    return saved


def _both(world: ServiceWorld) -> tuple[dict[str, MemoryPointer], dict[str, MemoryPointer]]:
    """The same three memories in the world's tenant and in another one."""
    other = _other_tenant(world)
    saved = {}
    for tenant_id in (world.tenant_id, other):
        saved[tenant_id] = {"mine": _save(world, tenant_id, MINE),
                            "agents": _save(world, tenant_id, AGENTS, "u2"),
                            "apps": _save(world, tenant_id, APPS)}
    return saved[world.tenant_id], saved[other]


def _key(world: ServiceWorld, scope_type: str, scope_ref: str,
         tenant_id: uuid.UUID | None = None) -> KeyRow:
    """The live key of the subject, as the write lookup answers it."""
    with world.runtime.sessions() as session:
        row = session.execute(select(SubjectKey).where(
            SubjectKey.tenant_id == (tenant_id or world.tenant_id),
            SubjectKey.scope_type == scope_type, SubjectKey.scope_ref == scope_ref,
            SubjectKey.destroyed_at.is_(None))).scalar_one()
        return KeyRow(row.id, row.scope_type, row.scope_ref, row.wrapped_key,
                      row.kek_version_id)


def _as_read(key: KeyRow) -> KeyRow:
    """The same key as the read lookups answer it (no scope: the pointer names it)."""
    assert key.wrapped_key is not None
    return KeyRow(key.id, "", "", bytes(key.wrapped_key), key.kek_version_id)


def _columns(pointer: MemoryPointer) -> tuple[object, ...]:
    return (pointer.id, pointer.tenant_id, pointer.scope_type, pointer.scope_ref, pointer.key,
            pointer.version, pointer.subject_user_id, pointer.storage_path,
            pointer.content_sha256, pointer.sync_status)


def _erasure(world: ServiceWorld, tenant_id: uuid.UUID, user: str) -> uuid.UUID:
    job_id = new_id()
    with world.runtime.sessions() as session:
        begin_write(session)
        session.add(SubjectErasure(tenant_id=tenant_id, user_id=user, job_id=job_id,
                                   started_at=utcnow()))
        session.commit()
    return job_id


def test_a_write_lookup_answers_the_row_its_subject_and_that_subjects_live_key(
        world: ServiceWorld) -> None:
    mine, theirs = _both(world)
    u1, u2, app1 = _key(world, "user", "u1"), _key(world, "user", "u2"), _key(world, "app",
                                                                                "app1")
    other_u1 = _key(world, "user", "u1", theirs["mine"].tenant_id)
    assert len({u1.id, u2.id, app1.id, other_u1.id}) == 4
    writes = [
        (MINE, None), (AGENTS, None),
        (AGENTS, "u1"),  # the write names another subject: that subject's key seals it
        (APPS, None),
        (MemoryAddress.parse(Scope.user, "u1", "new"), None),  # no row: the scope's user
        (MemoryAddress.parse(Scope.app, "app9", "new"), "u2"),
        (MemoryAddress.parse(Scope.agent, "a9", "new"), None),  # a scope without a key
    ]
    expected = [
        WriteLookup(mine["mine"].id, "u1", u1, None),
        WriteLookup(mine["agents"].id, "u2", u2, None),
        WriteLookup(mine["agents"].id, "u2", u1, None),
        WriteLookup(mine["apps"].id, None, app1, None),
        WriteLookup(None, None, u1, None),
        WriteLookup(None, None, u2, None),
        WriteLookup(None, None, None, None),
    ]
    with world.runtime.sessions() as session:
        one_by_one = [hotpath.lookup_for_write(session, world.tenant_id, address, user)
                      for address, user in writes]
        together = hotpath.lookup_many_for_write(session, world.tenant_id, writes)
        assert hotpath.lookup_many_for_write(session, world.tenant_id, []) == []
    assert one_by_one == expected
    assert together == expected


def test_a_destroyed_subject_key_is_no_live_key_for_either_lookup(world: ServiceWorld) -> None:
    mine, _ = _both(world)
    with world.runtime.sessions() as session:
        begin_write(session)
        session.execute(update(SubjectKey).where(
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_type == "user",
            SubjectKey.scope_ref == "u1").values(destroyed_at=utcnow(), wrapped_key=None))
        session.commit()
    with world.runtime.sessions() as session:
        assert hotpath.lookup_for_write(session, world.tenant_id, MINE, None) == WriteLookup(
            mine["mine"].id, "u1", None, None)
        found = hotpath.lookup_for_read(session, world.tenant_id, MINE)
        many = hotpath.lookup_many_for_read(session, world.tenant_id, [MINE])
    assert found is not None and found[1] is None
    assert _columns(found[0]) == _columns(mine["mine"])
    assert list(many) == [MINE] and many[MINE][1] is None


def test_a_running_erasure_of_the_subject_blocks_the_write_lookup(world: ServiceWorld) -> None:
    mine, theirs = _both(world)
    _save(world, world.tenant_id, MemoryAddress.parse(Scope.agent, "a3", "k"), "u3")
    job1 = _erasure(world, world.tenant_id, "u1")
    job3 = _erasure(world, world.tenant_id, "u3")
    _erasure(world, theirs["mine"].tenant_id, "u2")  # another tenant's subject u2
    writes = [
        (MemoryAddress.parse(Scope.user, "u1", "new"), None),  # the scope's user
        (MemoryAddress.parse(Scope.agent, "a3", "k"), None),  # the row's subject
        (MemoryAddress.parse(Scope.agent, "a3", "new"), "u1"),  # the write's subject
        (AGENTS, None), (APPS, None),  # u2 is erased in the other tenant only; no subject
    ]
    blocked = [job1, job3, job1, None, None]
    with world.runtime.sessions() as session:
        one_by_one = [hotpath.lookup_for_write(session, world.tenant_id, address, user)
                      for address, user in writes]
        together = hotpath.lookup_many_for_write(session, world.tenant_id, writes)
        # Both the scope's user and the write's subject are being erased: one job answers
        # (PostgreSQL refuses a subquery of two rows where one value is expected).
        both = hotpath.lookup_for_write(session, world.tenant_id, MINE, "u3")
    assert [w.blocked_by for w in one_by_one] == blocked
    assert [w.blocked_by for w in together] == blocked
    assert one_by_one[3] == WriteLookup(mine["agents"].id, "u2", _key(world, "user", "u2"),
                                        None)
    assert both.blocked_by in (job1, job3) and both.pointer_id == mine["mine"].id


def test_what_the_session_has_pending_is_committed_before_a_lookup(world: ServiceWorld) -> None:
    _both(world)
    jobs = {}
    for user, lookup in (("u5", hotpath.lookup_for_write), ("u6", None)):
        jobs[user] = new_id()
        with world.runtime.sessions() as session:
            begin_write(session)
            session.add(SubjectErasure(tenant_id=world.tenant_id, user_id=user,
                                       job_id=jobs[user], started_at=utcnow()))
            session.flush()
            address = MemoryAddress.parse(Scope.user, user, "k")
            if lookup is not None:
                found = [lookup(session, world.tenant_id, address, None)]
            else:
                found = hotpath.lookup_many_for_write(session, world.tenant_id,
                                                      [(address, None)])
            assert not session.in_transaction()
        assert [f.blocked_by for f in found] == [jobs[user]]
    retitle = update(MemoryPointer).where(
        MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.scope_type == "user",
        MemoryPointer.key == "k")
    with world.runtime.sessions() as session:  # the session's own pending change
        begin_write(session)
        session.execute(retitle.values(title="first"))
        read = hotpath.lookup_for_read(session, world.tenant_id, MINE)
        assert not session.in_transaction()
    assert read is not None and read[0].title == "first"
    with world.runtime.sessions() as session:  # a read that began before another's commit
        assert session.scalar(select(MemoryPointer.title).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "k",
            MemoryPointer.scope_type == "user")) == "first"
        with world.runtime.sessions() as writer:
            begin_write(writer)
            writer.execute(retitle.values(title="second"))
            writer.commit()
        many = hotpath.lookup_many_for_read(session, world.tenant_id, [MINE])
    assert many[MINE][0].title == "second"


def test_a_read_lookup_answers_the_pointer_and_its_subjects_live_key(
        world: ServiceWorld) -> None:
    mine, theirs = _both(world)
    keys = {"mine": _key(world, "user", "u1"), "agents": _key(world, "user", "u2"),
            "apps": _key(world, "app", "app1")}
    missing = MemoryAddress.parse(Scope.user, "u1", "missing")
    addresses = {"mine": MINE, "agents": AGENTS, "apps": APPS}
    with world.runtime.sessions() as session:
        single = {name: hotpath.lookup_for_read(session, world.tenant_id, address)
                  for name, address in addresses.items()}
        assert hotpath.lookup_for_read(session, world.tenant_id, missing) is None
        many = hotpath.lookup_many_for_read(session, world.tenant_id,
                                            [*addresses.values(), missing])
        assert hotpath.lookup_many_for_read(session, world.tenant_id, []) == {}
    assert set(many) == set(addresses.values())
    for name, address in addresses.items():
        for found in (single[name], many[address]):
            assert found is not None
            assert _columns(found[0]) == _columns(mine[name]) != _columns(theirs[name])
            assert found[1] == _as_read(keys[name])


@pytest.mark.databases("postgres")
def test_a_logged_read_lookup_writes_its_row_only_under_the_expected_key(
        world: ServiceWorld) -> None:
    mine, _ = _both(world)
    u1 = _as_read(_key(world, "user", "u1"))
    now = utcnow().replace(microsecond=0)
    row = ReadRow("key", "k-1", "agent-7", "req-1", "user sealed:" + "x" * 2500, now)

    def logged() -> list[tuple[object, ...]]:
        with world.runtime.sessions() as session:
            return [tuple(r) for r in session.execute(
                select(AccessLog.tenant_id, AccessLog.pointer_id, AccessLog.accessor_type,
                       AccessLog.accessor_id, AccessLog.agent_id, AccessLog.operation,
                       AccessLog.success, AccessLog.detail, AccessLog.request_id,
                       AccessLog.accessed_at)
                .where(AccessLog.tenant_id == world.tenant_id,
                       AccessLog.operation == "read")).all()]

    with world.runtime.sessions() as session:
        assert hotpath.lookup_for_read_logged(
            session, world.tenant_id, MemoryAddress.parse(Scope.user, "u1", "missing"), u1.id,
            row) == (None, False)
        other_key = hotpath.lookup_for_read_logged(session, world.tenant_id, MINE, new_id(),
                                                   row)
        assert logged() == []
        found, wrote = hotpath.lookup_for_read_logged(session, world.tenant_id, MINE, u1.id,
                                                      row)
    assert (wrote, other_key[1]) == (True, False)
    for answer in (found, other_key[0]):
        assert answer is not None
        assert _columns(answer[0]) == _columns(mine["mine"]) and answer[1] == u1
    assert logged() == [(world.tenant_id, mine["mine"].id, "key", "k-1", "agent-7", "read",
                         True, "user sealed:" + "x" * 1988, "req-1", now)]
    assert len(logged()[0][7]) == 2000  # type: ignore[arg-type]
    with world.runtime.sessions() as session:  # expired: found, but not servable
        begin_write(session)
        session.execute(update(MemoryPointer).where(MemoryPointer.id == mine["mine"].id)
                        .values(expires_at=now - timedelta(seconds=1)))
        session.commit()
        found, wrote = hotpath.lookup_for_read_logged(session, world.tenant_id, MINE, u1.id,
                                                      row)
    assert found is not None and found[0].id == mine["mine"].id and not wrote
    assert len(logged()) == 1


def test_the_lookups_answers_are_frozen() -> None:
    key = KeyRow(new_id(), "user", "u1", b"w", new_id())
    answers: list[object] = [key, WriteLookup(None, None, key, None),
                             ReadRow("key", "k", None, None, "", utcnow())]
    for answer in answers:
        field = dataclasses.fields(answer)[0].name  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(answer, field, None)
