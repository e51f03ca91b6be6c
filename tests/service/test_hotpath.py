"""The one-statement write and read paths: what they refuse, and that refusing writes nothing."""

from __future__ import annotations

import dataclasses

from sqlalchemy import func, select

from control_plane.db.base import new_id, utcnow
from control_plane.db.models import AccessLog, MemoryPointer, SubjectErasure
from control_plane.memories import hotpath
from control_plane.memories import service as memories
from control_plane.memories.addresses import MemoryAddress, Scope
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

META = MemoryMeta()


def _request(world: ServiceWorld, address: MemoryAddress, **changes: object
             ) -> hotpath.WriteRequest:
    with world.runtime.sessions() as session:
        found = hotpath.lookup_for_write(session, world.tenant_id, address, None)
        target = world.runtime.plane.active(session, world.tenant_id)
        session.commit()
    base = hotpath.WriteRequest(
        tenant_id=world.tenant_id, address=address, pointer_id=found.pointer_id or new_id(),
        seen_subject_user=found.subject_user_id, guard_user=address.scope_ref,
        config_id=target.config_id, path="memories/elsewhere.json", sha256="a" * 64, size=7,
        now=utcnow(), memory_type=None, default_memory_type="fact", tags=None,
        importance=None, title=None, meta_user=None, agent_id=None, expires_at=None,
        accessor_type="key", accessor_id="test", operation="write", request_id=None)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _state(world: ServiceWorld) -> tuple[list[tuple[object, ...]], int]:
    with world.runtime.sessions() as session:
        rows = [tuple(r) for r in session.execute(
            select(MemoryPointer.id, MemoryPointer.version, MemoryPointer.storage_path,
                   MemoryPointer.subject_user_id)
            .where(MemoryPointer.tenant_id == world.tenant_id)).all()]
        audits = session.scalar(select(func.count()).select_from(AccessLog)
                                .where(AccessLog.tenant_id == world.tenant_id)) or 0
    return rows, audits


def test_update_returns_the_superseded_object_and_audits_once(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "k")
    with world.runtime.sessions() as session:
        first = memories.set_value(session, world.runtime.plane, world.actor, address, 1, META)
    assert isinstance(first, MemoryPointer)
    _, audits_before = _state(world)
    with world.runtime.sessions() as session:
        outcome = hotpath.commit_write(session, _request(world, address))
    assert outcome.pointer is not None and outcome.blocked_by is None
    assert outcome.pointer.id == first.id
    assert outcome.pointer.version == 2
    assert outcome.pointer.storage_path == "memories/elsewhere.json"
    assert outcome.superseded == (first.storage_config_id, first.storage_path)
    rows, audits = _state(world)
    assert rows == [(first.id, 2, "memories/elsewhere.json", "u1")]
    assert audits == audits_before + 1


def test_a_row_that_changed_since_the_lookup_is_left_alone(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "k")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, 1, META)
    before = _state(world)
    stale_id = _request(world, address, pointer_id=new_id())  # sealed for another row
    stale_subject = _request(world, address, seen_subject_user="someone-else")
    for request in (stale_id, stale_subject):
        with world.runtime.sessions() as session:
            outcome = hotpath.commit_write(session, request)
        assert outcome == hotpath.WriteOutcome(None, None, None)
    assert _state(world) == before


def test_a_running_erasure_blocks_the_write_and_nothing_lands(world: ServiceWorld) -> None:
    existing = MemoryAddress.parse(Scope.user, "u2", "k")
    fresh = MemoryAddress.parse(Scope.user, "u2", "new")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, existing, 1, META)
        job_id = new_id()
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="u2", job_id=job_id,
                                   started_at=utcnow()))
        session.commit()
    before = _state(world)
    for address in (existing, fresh):
        with world.runtime.sessions() as session:
            outcome = hotpath.commit_write(session, _request(world, address,
                                                             guard_user="u2"))
        assert outcome == hotpath.WriteOutcome(None, None, job_id)
        with world.runtime.sessions() as session:
            assert hotpath.lookup_for_write(session, world.tenant_id, address,
                                            None).blocked_by == job_id
    assert _state(world) == before


def test_read_lookup_names_the_live_key_of_the_pointers_subject(world: ServiceWorld) -> None:
    mine = MemoryAddress.parse(Scope.agent, "a1", "k")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, mine, 1,
                           MemoryMeta(user_id="u3"))
        found = hotpath.lookup_for_read(session, world.tenant_id, mine)
        missing = hotpath.lookup_for_read(session, world.tenant_id,
                                          MemoryAddress.parse(Scope.agent, "a1", "nope"))
        subject_key = hotpath.lookup_for_write(session, world.tenant_id,
                                               MemoryAddress.parse(Scope.user, "u3", "x"), None)
    assert missing is None
    assert found is not None
    pointer, key = found
    assert pointer.subject_user_id == "u3"
    assert key is not None and subject_key.key is not None
    assert key.id == subject_key.key.id  # the user's key, not the agent scope's


def test_the_write_statement_stays_small_enough_for_psycopg_to_cache() -> None:
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH
    from sqlalchemy.dialects import postgresql

    sql = str(hotpath.WRITE_POSTGRES.compile(dialect=postgresql.dialect(driver="psycopg")))
    assert len(sql) <= MAX_CACHED_STATEMENT_LENGTH
