"""The one-statement write and read paths: what they refuse, that refusing writes nothing, and
the read whose lookup statement writes its own audit row."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id, utcnow
from control_plane.db.models import (
    AccessLog,
    GcCandidate,
    MemoryPointer,
    SubjectErasure,
    SubjectKey,
)
from control_plane.errors import HashMismatch, NotFound
from control_plane.memories import hotpath, hotpath_commit
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta, PointerOut, pointer_json
from control_plane.memories.write_request import WriteRequest
from tests.support.service import ServiceWorld

META = MemoryMeta()


def _request(world: ServiceWorld, address: MemoryAddress, **changes: object
             ) -> WriteRequest:
    with world.runtime.sessions() as session:
        found = hotpath.lookup_for_write(session, world.tenant_id, address, None)
        target = world.runtime.plane.active(session, world.tenant_id)
        session.commit()
    base = WriteRequest(
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
        outcome = hotpath_commit.commit_write(session, _request(world, address))
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
            outcome = hotpath_commit.commit_write(session, request)
        assert outcome == hotpath_commit.WriteOutcome(None, None, None)
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
            outcome = hotpath_commit.commit_write(session, _request(world, address,
                                                             guard_user="u2"))
        assert outcome == hotpath_commit.WriteOutcome(None, None, job_id)
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
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS
    from sqlalchemy.dialects import postgresql

    compiled = hotpath_commit.WRITE_POSTGRES.compile(
        dialect=postgresql.dialect(driver="psycopg"))
    sql = str(compiled).encode()
    # with a margin: the next column or check must not silently take it out of the cache
    assert len(sql) < 3_500 < MAX_CACHED_STATEMENT_LENGTH
    assert len(compiled.binds) < 40 < MAX_CACHED_STATEMENT_PARAMS


def _reads(world: ServiceWorld) -> list[tuple[object, bool, str]]:
    with world.runtime.sessions() as session:
        return [tuple(r) for r in session.execute(  # type: ignore[misc]
            select(AccessLog.pointer_id, AccessLog.success, AccessLog.detail)
            .where(AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "read")
            .order_by(AccessLog.id)).all()]



@pytest.mark.databases("postgres")
def test_a_read_of_a_known_address_is_audited_by_its_lookup_statement(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "k")
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor, address, 7,
                                     META)
    assert isinstance(pointer, MemoryPointer)
    assert world.read(address) == 7  # the first read: lookup, then the audit row
    batcher = world.runtime.plane.audit_batcher
    assert batcher is not None
    queued: list[object] = []
    monkeypatch.setattr(batcher, "record", lambda *a, **k: queued.append(a))
    assert [world.read(address) for _ in range(3)] == [7, 7, 7]
    assert queued == []  # no second statement: the lookup wrote each row
    reads = _reads(world)
    assert [(r[0], r[1]) for r in reads] == [(pointer.id, True)] * 4
    # Each row names the address sealed under the subject's key, as the first one does.
    assert all(str(r[2]).startswith("user sealed:") for r in reads)
    assert len({r[2] for r in reads}) == 4  # sealed afresh each time


@pytest.mark.databases("postgres")
def test_a_logged_read_that_fails_verification_adds_its_failure_row(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "bad")
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor, address,
                                     {"a": 1}, META)
    assert isinstance(pointer, MemoryPointer)
    assert world.read(address) == {"a": 1}
    target = world.runtime.plane.by_id(world.runtime.sessions(), pointer.storage_config_id)
    target.adapter.delete_many([pointer.storage_path])
    target.adapter.put(pointer.storage_path, b"tampered")
    with pytest.raises(HashMismatch):
        world.read(address)
    assert [(r[0], r[1]) for r in _reads(world)] == [
        (pointer.id, True), (pointer.id, True), (pointer.id, False)]
    assert str(_reads(world)[-1][2]).startswith("hash_mismatch: object could not be decrypted")


@pytest.mark.databases("postgres")
def test_a_logged_read_of_a_deleted_or_expired_memory_writes_no_success_row(
        world: ServiceWorld) -> None:
    gone = MemoryAddress.parse(Scope.user, "u1", "gone")
    old = MemoryAddress.parse(Scope.user, "u1", "old")
    with world.runtime.sessions() as session:
        for address in (gone, old):
            memories.set_value(session, world.runtime.plane, world.actor, address, 1, META)
    assert [world.read(gone), world.read(old)] == [1, 1]  # both addresses known now
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor, gone)
        session.execute(update(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "old")
            .values(expires_at=datetime(2020, 1, 1, tzinfo=UTC)))
        session.commit()
    for address, sentence in ((gone, "no memory at user/u1 key=gone"),
                              (old, "the memory at user/u1 key=old has expired")):
        with pytest.raises(NotFound) as raised:
            world.read(address)
        assert raised.value.detail == sentence
    assert [r[1] for r in _reads(world)] == [True, True, False, False]


@pytest.mark.databases("postgres")
def test_a_guess_at_a_key_that_changed_reads_and_audits_under_the_new_key(
        world: ServiceWorld) -> None:
    # The address's subject changes (a write with another user id): the remembered key is
    # not the live one, so the lookup writes nothing and the read audits on its own.
    address = MemoryAddress.parse(Scope.agent, "a1", "k")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, 1,
                           MemoryMeta(user_id="u1"))
    assert world.read(address) == 1
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, 2,
                           MemoryMeta(user_id="u2"))
    assert [world.read(address), world.read(address)] == [2, 2]
    with world.runtime.sessions() as session:
        keys = [hotpath.lookup_for_write(session, world.tenant_id, MemoryAddress.parse(
            Scope.user, user, "x"), None).key for user in ("u1", "u2")]
    assert keys[0] is not None and keys[1] is not None
    reads = _reads(world)
    assert [r[1] for r in reads] == [True, True, True]
    # "agent sealed:<key id hex>:…": the first row under u1's key, the others under u2's.
    assert [str(r[2]).split(":")[1] for r in reads] == [
        keys[0].id.hex, keys[1].id.hex, keys[1].id.hex]


def test_a_batch_commit_settles_each_write_as_its_single_commit_would(
        world: ServiceWorld) -> None:
    """One ``commit_writes`` with a write of every kind: each lands or is refused on its
    own, exactly as ``commit_write`` would settle it, and only what landed is audited."""
    addresses = {name: MemoryAddress.parse(Scope.user, user, "k") for name, user in (
        ("fresh", "u4"), ("update", "u5"), ("stale_id", "u6"), ("stale_subject", "u7"),
        ("erased", "u8"), ("marked", "u9"), ("key_gone", "u10"))}
    first: dict[str, MemoryPointer] = {}
    with world.runtime.sessions() as session:
        for name in ("update", "stale_id", "stale_subject", "key_gone"):
            saved = memories.set_value(session, world.runtime.plane, world.actor,
                                       addresses[name], 1, META)
            assert isinstance(saved, MemoryPointer)
            first[name] = saved
        job_id = new_id()
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="u8", job_id=job_id,
                                   started_at=utcnow()))
        session.commit()
    requests = {name: _request(world, address, guard_user=address.scope_ref)
                for name, address in addresses.items()}
    with world.runtime.sessions() as session:
        key_id = hotpath.lookup_for_write(session, world.tenant_id, addresses["key_gone"],
                                          None).key.id  # type: ignore[union-attr]
        session.execute(update(SubjectKey).where(SubjectKey.id == key_id)
                        .values(destroyed_at=utcnow()))
        session.add(GcCandidate(storage_config_id=requests["marked"].config_id,
                                path="memories/marked.json", tenant_id=world.tenant_id,
                                marked_at=utcnow()))
        session.commit()
    requests |= {
        "stale_id": dataclasses.replace(requests["stale_id"], pointer_id=new_id()),
        "stale_subject": dataclasses.replace(requests["stale_subject"],
                                             seen_subject_user="someone-else"),
        "marked": dataclasses.replace(requests["marked"], path="memories/marked.json"),
        "key_gone": dataclasses.replace(requests["key_gone"], key_id=key_id)}
    names = list(requests)
    _, audits_before = _state(world)

    with world.runtime.sessions() as session:
        outcomes = dict(zip(names, hotpath_commit.commit_writes(
            session, [requests[n] for n in names]), strict=True))

    refused = hotpath_commit.WriteOutcome(None, None, None)
    assert {n: o for n, o in outcomes.items() if o.pointer is None} == {
        "stale_id": refused, "stale_subject": refused, "erased": hotpath_commit.WriteOutcome(
            None, None, job_id), "marked": refused, "key_gone": refused}
    fresh, updated = outcomes["fresh"], outcomes["update"]
    assert fresh.pointer is not None and updated.pointer is not None
    assert (fresh.pointer.id, fresh.pointer.version, fresh.superseded) == (
        requests["fresh"].pointer_id, 1, None)
    assert (updated.pointer.id, updated.pointer.version, updated.superseded) == (
        first["update"].id, 2, (first["update"].storage_config_id,
                                first["update"].storage_path))
    rows, audits = _state(world)
    assert sorted((str(r[3]), r[1], r[2]) for r in rows) == sorted(
        [("u4", 1, "memories/elsewhere.json"), ("u5", 2, "memories/elsewhere.json")]
        + [(p.subject_user_id or "", 1, p.storage_path) for n, p in first.items()
           if n != "update"])
    assert audits == audits_before + 2
    with world.runtime.sessions() as session:
        details = sorted(session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id,
            AccessLog.pointer_id.in_([fresh.pointer.id, updated.pointer.id]),
            AccessLog.operation == "write",
            AccessLog.accessed_at.in_([requests["fresh"].now, requests["update"].now]))))
    assert details == ["user v1 7 bytes", "user v2 7 bytes"]


def test_a_batch_lookup_answers_what_each_lookup_would(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        for address, user in ((MemoryAddress.parse(Scope.user, "u11", "k"), None),
                              (MemoryAddress.parse(Scope.agent, "a2", "k"), "u12"),
                              (MemoryAddress.parse(Scope.app, "app1", "k"), None)):
            memories.set_value(session, world.runtime.plane, world.actor, address, 1,
                               MemoryMeta(user_id=user))
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="u13", job_id=new_id(),
                                   started_at=utcnow()))
        session.commit()
    writes = [(MemoryAddress.parse(Scope.user, "u11", "k"), None),
              (MemoryAddress.parse(Scope.user, "u11", "new"), None),
              (MemoryAddress.parse(Scope.agent, "a2", "k"), None),
              (MemoryAddress.parse(Scope.agent, "a2", "k"), "u13"),
              (MemoryAddress.parse(Scope.agent, "a2", "new"), "u12"),
              (MemoryAddress.parse(Scope.app, "app1", "k"), None),
              (MemoryAddress.parse(Scope.app, "app2", "k"), None),
              (MemoryAddress.parse(Scope.user, "u13", "k"), None)]
    with world.runtime.sessions() as session:
        together = hotpath.lookup_many_for_write(session, world.tenant_id, writes)
        one_by_one = [hotpath.lookup_for_write(session, world.tenant_id, a, u)
                      for a, u in writes]
    assert together == one_by_one
    assert [w.pointer_id is not None for w in together] == [
        True, False, True, True, False, True, False, False]
    assert [w.key is not None for w in together] == [True, True, True, False, True, True,
                                                      False, False]
    assert [w.blocked_by is not None for w in together] == [
        False, False, False, True, False, False, False, True]


def test_a_pointer_answer_reads_what_is_saved_even_when_its_state_has_expired(
        world: ServiceWorld) -> None:
    """``pointer_json`` reads loaded values straight from the instance; an instance whose
    state a commit expired is read through the ORM, so a column changed in the database
    since (here the archive tier's storage class) is answered as saved."""
    address = MemoryAddress.parse(Scope.user, "u-json", "k")
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor, address,
                                     {"a": 1}, META)
        assert isinstance(pointer, MemoryPointer)
        loaded = pointer_json(pointer)
        assert loaded == PointerOut.of(pointer).model_dump(mode="json")
        assert (loaded["storage_class"], loaded["version"]) == (None, 1)
        session.execute(update(MemoryPointer).where(MemoryPointer.id == pointer.id)
                        .values(storage_class="STANDARD_IA"))
        session.commit()
        session.expire(pointer)
        assert "storage_class" not in pointer.__dict__
        answer = pointer_json(pointer)
        assert answer["storage_class"] == "STANDARD_IA"
        assert answer == PointerOut.of(pointer).model_dump(mode="json") == loaded | {
            "storage_class": "STANDARD_IA"}
