"""The hot path's step 3 (``memories/hotpath_commit.py``) on SQLite and PostgreSQL, called as
the write and batch paths call it: the exact row a new write inserts (its defaults) and an
update leaves (what it keeps, what it replaces, the expiry it does not inherit), the audit
row, each guard looking only at its own tenant, key and object and refusing a new key's
write as an update's, a row gone since the lookup, and the session's transaction before and
after."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import func, select, text, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id, utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import (
    AccessLog,
    GcCandidate,
    MemoryPointer,
    SubjectErasure,
    SubjectKey,
)
from control_plane.memories import hotpath, hotpath_commit
from control_plane.memories import service as memories
from control_plane.memories.hotpath_commit import WriteOutcome
from control_plane.memories.schemas import MemoryMeta
from control_plane.memories.write_request import WriteRequest
from control_plane.tenants.service import create_tenant
from tests.support.service import ServiceWorld

REFUSED = WriteOutcome(None, None, None)
ROW = ("version", "memory_type", "tags", "importance", "source", "subject_user_id",
       "agent_id", "title", "expires_at", "storage_path", "content_sha256", "content_size",
       "sync_status", "searchable", "has_embeddings", "created_at", "updated_at")


def _request(world: ServiceWorld, address: MemoryAddress, **changes: object) -> WriteRequest:
    """What the fast path would commit for a write of ``address`` now, without a put."""
    with world.runtime.sessions() as session:
        found = hotpath.lookup_for_write(session, world.tenant_id, address, None)
        target = world.runtime.plane.active(session, world.tenant_id)
        session.commit()
    base = WriteRequest(
        tenant_id=world.tenant_id, address=address, pointer_id=found.pointer_id or new_id(),
        seen_subject_user=found.subject_user_id, guard_user=address.user_ref,
        config_id=target.config_id, path=f"memories/{new_id().hex}.json", sha256="a" * 64,
        size=7, now=utcnow().replace(microsecond=0), memory_type=None,
        default_memory_type="fact", tags=None, importance=None, title=None, meta_user=None,
        agent_id=None, expires_at=None, accessor_type="key", accessor_id="k-1",
        operation="write", request_id="req-1", accessor_agent_id="agent-7",
        audit_address=" sealed:x", key_id=found.key.id if found.key is not None else None,
        existed=found.pointer_id is not None)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _commit(world: ServiceWorld, request: WriteRequest) -> WriteOutcome:
    with world.runtime.sessions() as session:
        return hotpath_commit.commit_write(session, request)


def _row(world: ServiceWorld, pointer_id: uuid.UUID) -> dict[str, object] | None:
    with world.runtime.sessions() as session:
        pointer = session.get(MemoryPointer, pointer_id)
        return None if pointer is None else {name: getattr(pointer, name) for name in ROW}


def _writes(world: ServiceWorld) -> list[tuple[object, ...]]:
    with world.runtime.sessions() as session:
        return [tuple(r) for r in session.execute(
            select(AccessLog.pointer_id, AccessLog.accessor_type, AccessLog.accessor_id,
                   AccessLog.agent_id, AccessLog.operation, AccessLog.success,
                   AccessLog.detail, AccessLog.request_id, AccessLog.accessed_at)
            .where(AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "write",
                   AccessLog.accessor_id == "k-1")
            .order_by(AccessLog.accessed_at)).all()]


def _pointers(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        return session.scalar(select(func.count()).select_from(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id)) or 0


def test_a_new_row_takes_the_defaults_and_an_update_keeps_what_it_does_not_name(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "k")
    new = _request(world, address)
    first = _commit(world, new)
    assert first.pointer is not None and (first.superseded, first.blocked_by) == (None, None)
    assert first.pointer.id == new.pointer_id
    fresh = {"version": 1, "memory_type": "fact", "tags": [], "importance": 3,
             "source": "api", "subject_user_id": "u1", "agent_id": None, "title": None,
             "expires_at": None, "storage_path": new.path, "content_sha256": "a" * 64,
             "content_size": 7, "sync_status": "synced", "searchable": True,
             "has_embeddings": False, "created_at": new.now, "updated_at": new.now}
    assert _row(world, new.pointer_id) == fresh

    later = new.now + timedelta(seconds=1)
    named = _request(world, address, now=later, memory_type="note", tags=["b", "a"],
                     importance=5, title="T", agent_id="ag", source="remember",
                     searchable=False, expires_at=later + timedelta(days=1), size=9)
    second = _commit(world, named)
    assert second.pointer is not None and second.pointer.version == 2
    assert second.superseded == (new.config_id, new.path)
    changed = fresh | {"version": 2, "memory_type": "note", "tags": ["b", "a"],
                       "importance": 5, "title": "T", "agent_id": "ag", "source": "remember",
                       "searchable": False, "expires_at": later + timedelta(days=1),
                       "storage_path": named.path, "content_size": 9, "updated_at": later}
    assert _row(world, new.pointer_id) == changed

    last = later + timedelta(seconds=1)
    bare = _request(world, address, now=last)
    assert _commit(world, bare).superseded == (named.config_id, named.path)
    assert _row(world, new.pointer_id) == changed | {
        "version": 3, "storage_path": bare.path, "content_size": 7, "updated_at": last}
    assert _writes(world) == [
        (new.pointer_id, "key", "k-1", "agent-7", "write", True, detail, "req-1", at)
        for detail, at in (("user v1 7 bytes sealed:x", new.now),
                           ("user v2 9 bytes sealed:x", later),
                           ("user v3 7 bytes sealed:x", last))]


def test_a_memory_whose_ttl_ran_out_does_not_pass_its_expiry_to_the_new_value(
        world: ServiceWorld) -> None:
    ended, running = (MemoryAddress.parse(Scope.user, "u1", key) for key in ("ended", "on"))
    now = utcnow().replace(microsecond=0)
    for address, expires in ((ended, now), (running, now + timedelta(seconds=1))):
        created = _commit(world, _request(world, address, now=now - timedelta(hours=1),
                                          expires_at=expires))
        assert created.pointer is not None
        again = _request(world, address, now=now)  # no ttl of its own
        assert _commit(world, again).pointer is not None
        assert _row(world, again.pointer_id)["expires_at"] == (  # type: ignore[index]
            None if address is ended else expires)


def test_each_guard_looks_only_at_its_own_tenant_key_and_object(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        other, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
        theirs = world.runtime.plane.active(session, other.id).config_id
    for user in ("u1", "u9"):
        with world.runtime.sessions() as session:
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.user, user, "k"), 1, MemoryMeta())
    address = MemoryAddress.parse(Scope.user, "u1", "k")
    request = _request(world, address)
    assert request.key_id is not None
    with world.runtime.sessions() as session:
        begin_write(session)
        session.add(SubjectErasure(tenant_id=other.id, user_id="u1", job_id=new_id(),
                                   started_at=utcnow()))
        session.execute(update(SubjectKey).where(  # another subject's key, destroyed
            SubjectKey.tenant_id == world.tenant_id, SubjectKey.scope_ref == "u9")
            .values(destroyed_at=utcnow(), wrapped_key=None))
        session.add_all([  # GC marked the same path in another bucket, another path in ours
            GcCandidate(storage_config_id=theirs, path=request.path, tenant_id=other.id),
            GcCandidate(storage_config_id=request.config_id, path=request.path + ".other",
                        tenant_id=world.tenant_id)])
        session.commit()
    landed = _commit(world, request)
    assert landed.pointer is not None and landed.pointer.version == 2

    marked = _request(world, address, path=request.path + ".other")
    assert _commit(world, marked) == REFUSED
    with world.runtime.sessions() as session:
        begin_write(session)
        session.execute(update(SubjectKey).where(SubjectKey.id == request.key_id)
                        .values(destroyed_at=utcnow(), wrapped_key=None))
        session.commit()
    assert _commit(world, dataclasses.replace(marked, path=request.path + ".new")) == REFUSED
    job = new_id()
    with world.runtime.sessions() as session:
        begin_write(session)
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="u1", job_id=job,
                                   started_at=utcnow()))
        session.commit()
    assert _commit(world, _request(world, address)) == WriteOutcome(None, None, job)
    assert _row(world, request.pointer_id)["version"] == 2  # type: ignore[index]


def test_a_new_keys_write_is_refused_by_each_guard_and_inserts_nothing(
        world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:  # the subject's key exists: u2 has a memory
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.user, "u2", "first"), 1, MemoryMeta())
    address = MemoryAddress.parse(Scope.user, "u2", "new")
    request = _request(world, address)
    assert (request.existed, request.key_id is not None) == (False, True)
    before = _pointers(world)

    with world.runtime.sessions() as session:  # orphan GC marked the new object
        begin_write(session)
        session.add(GcCandidate(storage_config_id=request.config_id, path=request.path,
                                tenant_id=world.tenant_id))
        session.commit()
    assert _commit(world, request) == REFUSED

    taken = _request(world, MemoryAddress.parse(Scope.user, "u2", "first"))  # a row is there
    assert _commit(world, dataclasses.replace(
        taken, existed=False, pointer_id=new_id(), seen_subject_user=None)) == REFUSED

    job = new_id()
    with world.runtime.sessions() as session:  # an erasure of the subject started
        begin_write(session)
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="u2", job_id=job,
                                   started_at=utcnow()))
        session.commit()
    fresh = _request(world, address, path=request.path + ".2")
    assert _commit(world, fresh) == WriteOutcome(None, None, job)
    with world.runtime.sessions() as session:
        begin_write(session)
        session.execute(SubjectErasure.__table__.delete().where(
            SubjectErasure.job_id == job))
        session.execute(update(SubjectKey).where(SubjectKey.id == request.key_id)
                        .values(destroyed_at=utcnow(), wrapped_key=None))  # erased since
        session.commit()
    assert _commit(world, _request(world, address, path=request.path + ".3",
                                   key_id=request.key_id)) == REFUSED
    assert (_pointers(world), _row(world, request.pointer_id), _writes(world)) == (
        before, None, [])


def test_a_row_gone_since_the_lookup_is_not_created_again(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "gone")
    request = _request(world, address, existed=True)
    before = _pointers(world)
    assert _commit(world, request) == REFUSED
    assert (_pointers(world), _row(world, request.pointer_id), _writes(world)) == (
        before, None, [])


def test_what_the_session_has_pending_is_committed_before_the_row_moves(
        world: ServiceWorld) -> None:
    one = _request(world, MemoryAddress.parse(Scope.user, "u1", "one"))
    assert _commit(world, one).pointer is not None
    for title, keys in (("single", ["two"]), ("batch", ["three", "four"])):
        requests = [_request(world, MemoryAddress.parse(Scope.user, "u1", key))
                    for key in keys]
        with world.runtime.sessions() as session:
            begin_write(session)
            session.execute(update(MemoryPointer).where(MemoryPointer.id == one.pointer_id)
                            .values(title=title))
            if len(requests) == 1:
                outcomes = [hotpath_commit.commit_write(session, requests[0])]
            else:
                outcomes = hotpath_commit.commit_writes(session, requests)
            assert not session.in_transaction()
        assert [o.pointer.id if o.pointer else None for o in outcomes] == [
            r.pointer_id for r in requests]
        with world.runtime.sessions() as session:
            assert session.scalar(select(MemoryPointer.title).where(
                MemoryPointer.id == one.pointer_id)) == title


def test_a_batch_that_fails_saves_nothing_and_leaves_no_transaction_open(
        world: ServiceWorld) -> None:
    taken = _commit(world, _request(world, MemoryAddress.parse(Scope.user, "u1", "taken")))
    assert taken.pointer is not None
    before = _pointers(world)
    good = _request(world, MemoryAddress.parse(Scope.user, "u1", "a"))
    clash = _request(world, MemoryAddress.parse(Scope.user, "u1", "b"),
                     pointer_id=taken.pointer.id)  # a new row with a taken id
    with world.runtime.sessions() as session:
        with pytest.raises(sa_exc.IntegrityError):
            hotpath_commit.commit_writes(session, [good, clash])
        assert not session.in_transaction()
    assert (_pointers(world), _row(world, good.pointer_id)) == (before, None)


def test_a_batch_answers_in_the_order_of_its_requests(world: ServiceWorld) -> None:
    addresses = [MemoryAddress.parse(Scope.user, user, key)
                 for user, key in (("u2", "b"), ("u1", "z"), ("u2", "a"), ("u1", "a"))]
    requests = [_request(world, a) for a in addresses]
    with world.runtime.sessions() as session:
        outcomes = hotpath_commit.commit_writes(session, requests)
    assert [(o.pointer.id if o.pointer else None) for o in outcomes] == [
        r.pointer_id for r in requests]
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcomes[0].blocked_by = new_id()  # type: ignore[misc]
    one = _request(world, MemoryAddress.parse(Scope.user, "u3", "only"))
    with world.runtime.sessions() as session:  # a batch of one
        assert [o.pointer.id if o.pointer else None
                for o in hotpath_commit.commit_writes(session, [one])] == [one.pointer_id]


@pytest.mark.databases("postgres")
def test_a_batch_statement_takes_one_tenants_writes_only(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        other, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    mine = _request(world, MemoryAddress.parse(Scope.user, "u1", "k"))
    theirs = dataclasses.replace(mine, tenant_id=other.id, pointer_id=new_id())
    before = _pointers(world)
    with world.runtime.sessions() as session, pytest.raises(ValueError):
        hotpath_commit.commit_writes(session, [mine, theirs])
    assert _pointers(world) == before


def _lock_waiters(world: ServiceWorld) -> int:
    with world.runtime.engine.connect() as conn:
        return conn.scalar(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'")) or 0


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # only a hang waits this long
    while not condition():
        assert time.monotonic() < deadline, "the batch never queued on the row lock"
        time.sleep(0.02)


@pytest.mark.databases("postgres")
def test_two_batches_naming_the_same_rows_in_opposite_orders_lock_them_in_one_order(
        world: ServiceWorld) -> None:
    """A holds row ``a``; batch 1 (``a``, ``b``) queues on it, then batch 2 (``b``, ``a``).
    Both lock in address order, so batch 2 also queues on ``a`` holding nothing, and once A
    lets go both land; locking ``b`` first would deadlock it with batch 1."""
    a, b = (MemoryAddress.parse(Scope.user, "u1", key) for key in ("a", "b"))
    ids = {}
    for address in (a, b):
        created = _commit(world, _request(world, address))
        assert created.pointer is not None
        ids[address] = created.pointer.id
    outcomes: dict[int, list[WriteOutcome]] = {}
    errors: list[BaseException] = []

    def batch(n: int, order: tuple[MemoryAddress, ...]) -> None:
        try:
            with world.runtime.sessions() as session:
                outcomes[n] = hotpath_commit.commit_writes(
                    session, [_request(world, address) for address in order])
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    with world.runtime.engine.connect() as holder:
        holder.execute(select(MemoryPointer.id).where(MemoryPointer.id == ids[a])
                       .with_for_update())
        threads = [threading.Thread(target=batch, args=(1, (a, b))),
                   threading.Thread(target=batch, args=(2, (b, a)))]
        for n, thread in enumerate(threads, start=1):
            thread.start()
            _until(lambda n=n: _lock_waiters(world) >= n)  # type: ignore[misc]
        holder.rollback()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert [[o.pointer is not None for o in outcomes[n]] for n in (1, 2)] == [[True] * 2] * 2
    assert [_row(world, ids[x])["version"] for x in (a, b)] == [3, 3]  # type: ignore[index]
