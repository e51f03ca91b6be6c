"""The read-audit batcher (group commit, I6) on embedded SQLite with no server: every column of
a row as it lands, the lead handed to the first reader still queued, the batches a leader
cuts the queue into, a refused batch failing every read in it, a wait that runs out, what
``close`` leaves, and the one-transaction SQLite insert. Each race is held at the batcher's
named checkpoints (``batcher_steps.py``); the PostgreSQL paths are in
``test_audit_batcher_postgres.py``."""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc

from control_plane.audit import batcher as batcher_module
from control_plane.audit import service as audit
from control_plane.audit.batcher import AuditBatcher
from control_plane.kit import request_id_var
from tests.unit.batcher_steps import (
    SHORT,
    Steps,
    all_rows,
    details,
    queue,
    start_held,
)
from tests.unit.checkpoint_world import World, make_world

AT = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


# ``steps``, ``batcher`` and ``at`` serve ``test_audit_batcher_postgres.py`` too, on its world.
@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Steps:
    s = Steps()
    monkeypatch.setattr(batcher_module, "checkpoint", s)
    return s


@pytest.fixture
def batcher(world: World) -> Iterator[AuditBatcher]:
    b = AuditBatcher(world.engine)
    yield b
    b.close()


@pytest.fixture
def at(monkeypatch: pytest.MonkeyPatch) -> datetime:
    monkeypatch.setattr(batcher_module, "utcnow", lambda: AT)
    return AT


def log_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records
            if r.name == batcher_module.__name__]


def a_row(tenant: uuid.UUID, detail: str) -> dict[str, object]:
    """A row as ``record`` queues it."""
    return {"tenant_id": tenant, "pointer_id": None, "event_id": None,
            "accessor_type": "api", "accessor_id": "queued", "operation": "read",
            "success": True, "detail": detail, "request_id": None, "accessed_at": AT,
            "agent_id": None}


def test_a_lone_read_commits_its_own_row_with_every_column_and_gives_the_lead_back(
        world: World, batcher: AuditBatcher, steps: Steps, at: datetime) -> None:
    pointer = uuid.uuid4()
    token = request_id_var.set("req-1")
    try:
        batcher.record(world.tenant, "agent", "key:k1", "read", pointer_id=pointer,
                       detail="x" * 2500, agent_id="bot", timeout=SHORT)
    finally:
        request_id_var.reset(token)
    assert (batcher._leading, batcher._queue) == (False, [])
    batcher.record(world.tenant, "api", "key:k2", "list", timeout=SHORT)  # leads again
    me = threading.current_thread().name
    assert steps.seen == [(me, "queued"), (me, "commit")] * 2
    assert all_rows(world) == [
        (world.tenant, pointer, None, "agent", "key:k1", "bot", "read", True, "x" * 2000,
         "req-1", at, None),
        (world.tenant, None, None, "api", "key:k2", None, "list", True, "", None, at, None)]
    assert (batcher._leading, batcher._queue) == (False, [])


def test_record_many_and_record_operations_commit_their_rows_at_once_in_order(
        world: World, batcher: AuditBatcher, steps: Steps, at: datetime) -> None:
    p1, p2 = uuid.uuid4(), uuid.uuid4()
    token = request_id_var.set("req-9")
    try:
        batcher.record_many(world.tenant, "agent", "key:k", "read",
                            [(p1, "a"), (None, "y" * 2001)], agent_id="bot")
    finally:
        request_id_var.reset(token)
    batcher.record_operations(world.tenant, "api", "key:j",
                              [("search", None, "q"), ("read", p2, "b")])
    batcher.record_operations(world.tenant, "api", "key:j", [])
    batcher.record_many(world.tenant, "api", "key:j", "read", [])
    assert steps.seen == []  # never queued behind other readers
    assert all_rows(world) == [
        (world.tenant, p1, None, "agent", "key:k", "bot", "read", True, "a", "req-9", at, None),
        (world.tenant, None, None, "agent", "key:k", "bot", "read", True, "y" * 2000, "req-9",
         at, None),
        (world.tenant, None, None, "api", "key:j", None, "search", True, "q", None, at, None),
        (world.tenant, p2, None, "api", "key:j", None, "read", True, "b", None, at, None)]


def test_the_leader_hands_off_to_the_first_queued_read_and_every_read_waits_for_its_row(
        world: World, batcher: AuditBatcher, steps: Steps, at: datetime) -> None:
    pointer = uuid.uuid4()
    leader, release = start_held(world, batcher, steps)
    followers = queue(world, batcher, steps, "f1", "f2", "f3",
                      f2={"pointer_id": pointer, "agent_id": "bot", "request_id": "req-2"})
    release.set()
    assert leader.finish() is None
    assert [r.finish() for r in followers] == [None, None, None]
    # Each returned only once its own row could be read back.
    assert [r.durable for r in (leader, *followers)] == [True] * 4
    assert steps.names("commit") == [leader.name, followers[0].name]  # batches of 1 and 3
    assert all_rows(world) == [
        (world.tenant, None, None, "api", "reader", None, "read", True, "leader", None, at,
         None),
        (world.tenant, None, None, "api", "reader", None, "read", True, "f1", None, at, None),
        (world.tenant, pointer, None, "api", "reader", "bot", "read", True, "f2", "req-2", at,
         None),
        (world.tenant, None, None, "api", "reader", None, "read", True, "f3", None, at, None)]
    assert (batcher._leading, batcher._queue) == (False, [])
    # The sealer chains the rows as they landed, and the chain over them verifies.
    with world.sessions() as session:
        assert audit.seal(session, world.tenant) == 4
        assert audit.verify(session, world.tenant).ok
    assert [row[-1] for row in all_rows(world)] == [1, 2, 3, 4]


def refused_batch(world: World, batcher: AuditBatcher, steps: Steps,
                  caplog: pytest.LogCaptureFixture) -> sa_exc.IntegrityError:
    """A batch the database refuses, on either database: every read in it fails with the
    same error (returned), none of its rows lands, the connection is dropped, not retried,
    and the next read commits on a fresh one."""
    caplog.set_level(logging.INFO, logger=batcher_module.__name__)
    leader, release = start_held(world, batcher, steps)
    # Three reads queue behind it; one row names a tenant that does not exist, so the
    # database refuses the batch the three share (a foreign key).
    a, b, c = queue(world, batcher, steps, "a", "b", "c", tenant_ids={"b": uuid.uuid4()})
    held_a = steps.hold(a.name, "commit")
    release.set()
    assert leader.finish() is None and leader.durable is True
    assert steps.reached(a.name, "commit").wait(SHORT)
    used = batcher._conn
    assert used is not None and not used.closed
    held_a.set()
    outcomes = [r.finish() for r in (a, b, c)]
    assert isinstance(outcomes[0], sa_exc.IntegrityError)
    assert outcomes[1] is outcomes[0] and outcomes[2] is outcomes[0]  # each hears of it
    assert outcomes[0].connection_invalidated is False  # a refusal, not a lost connection
    # None of them was answered, and none of their rows is there (a and c were sound rows,
    # refused with the batch); the connection is dropped, not retried.
    assert details(world) == ["leader"]
    assert (used.closed, batcher._conn) == (True, None)
    assert log_lines(caplog) == [("WARNING", "audit batch of 3 rows failed: IntegrityError")]
    # The batcher carries on: the next read commits on a fresh connection.
    [d] = queue(world, batcher, steps, "d")
    assert d.finish() is None and d.durable is True
    assert batcher._conn is not None and batcher._conn is not used
    assert steps.names("commit") == [leader.name, a.name, d.name]  # a led the refused batch
    assert details(world) == ["d", "leader"]
    assert (batcher._leading, batcher._queue) == (False, [])
    return outcomes[0]


def test_a_refused_batch_fails_every_read_in_it_and_the_next_starts_on_a_fresh_connection(
        world: World, batcher: AuditBatcher, steps: Steps,
        caplog: pytest.LogCaptureFixture) -> None:
    refused = refused_batch(world, batcher, steps, caplog)
    assert isinstance(refused.orig, sqlite3.IntegrityError)


def test_an_error_before_any_connection_reaches_the_reader_and_the_batcher_carries_on(
        world: World, batcher: AuditBatcher, steps: Steps) -> None:
    def fail(_name: str) -> None:
        raise RuntimeError("held up")

    steps.on["commit"] = fail
    with pytest.raises(RuntimeError, match="^held up$"):
        batcher.record(world.tenant, "api", "r", "read", detail="lost", timeout=SHORT)
    assert (batcher._conn, batcher._leading, batcher._queue) == (None, False, [])
    del steps.on["commit"]
    batcher.record(world.tenant, "api", "r", "read", detail="kept", timeout=SHORT)
    assert details(world) == ["kept"]


def test_a_read_whose_wait_runs_out_in_the_queue_is_refused_and_its_row_never_lands(
        world: World, batcher: AuditBatcher, steps: Steps) -> None:
    leader, release = start_held(world, batcher, steps)
    [late] = queue(world, batcher, steps, "late", timeout=0.01)
    assert steps.reached(late.name, "timed-out").wait(SHORT)
    outcome = late.finish(SHORT)  # the leader is still held: nothing committed its row
    assert isinstance(outcome, TimeoutError)
    assert str(outcome) == "the audit row was not committed in time"
    assert batcher._queue == []
    release.set()
    assert leader.finish() is None
    [after] = queue(world, batcher, steps, "after")
    assert after.finish() is None
    assert details(world) == ["after", "leader"]  # the refused read left no row
    assert (batcher._leading, batcher._queue) == (False, [])


def test_a_read_whose_wait_runs_out_while_its_row_is_being_committed_waits_for_it(
        world: World, batcher: AuditBatcher, steps: Steps) -> None:
    # The leader is held after queueing its row, before it takes a batch: the follower's
    # row joins the leader's batch, which is then held at its commit.
    leader, at_queue = start_held(world, batcher, steps, step="queued")
    commit_gate = steps.hold(leader.name, "commit")
    [follower] = queue(world, batcher, steps, "follower", timeout=0.01)
    at_queue.set()
    assert steps.reached(leader.name, "commit").wait(SHORT)
    assert steps.reached(follower.name, "timed-out").wait(SHORT)
    assert follower.outcome == "not finished"  # its row is in flight: it keeps waiting
    commit_gate.set()
    assert leader.finish() is None
    assert follower.finish() is None and follower.durable is True
    assert steps.names("commit") == [leader.name]  # one batch of 2
    assert details(world) == ["follower", "leader"]
    assert (batcher._leading, batcher._queue) == (False, [])


def test_a_queued_read_waits_30_seconds_by_default(
        world: World, batcher: AuditBatcher, steps: Steps,
        monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[tuple[str, Any]] = []
    wait = threading.Event.wait

    def spy(self: threading.Event, timeout: float | None = None) -> bool:
        waits.append((threading.current_thread().name, timeout))
        return wait(self, timeout)

    leader, release = start_held(world, batcher, steps)
    monkeypatch.setattr(threading.Event, "wait", spy)
    [follower] = queue(world, batcher, steps, "follower", timeout=None)
    release.set()
    assert (leader.finish(), follower.finish()) == (None, None)
    assert [timeout for name, timeout in waits if name == follower.name] == [30]


def test_a_leader_cuts_the_queue_into_batches_of_500_by_default(
        world: World, batcher: AuditBatcher, steps: Steps) -> None:
    # The queue as 600 readers would have left it behind a leader that has just finished.
    waiting = [batcher_module._Pending(a_row(world.tenant, f"q{i}")) for i in range(600)]
    batcher._queue.extend(waiting)
    left: list[int] = []
    steps.on["commit"] = lambda _name: left.append(len(batcher._queue))
    batcher.record(world.tenant, "api", "queued", "read", detail="mine", timeout=SHORT)
    assert left == [101, 0]
    assert [(p.done.is_set(), p.error, p.lead) for p in waiting] == [(True, None, False)] * 600
    assert [row[8] for row in all_rows(world)] == [f"q{i}" for i in range(600)] + ["mine"]


def test_a_leader_with_a_smaller_batch_commits_until_its_own_row_is_in(
        world: World, steps: Steps) -> None:
    small = AuditBatcher(world.engine, max_batch=2)
    try:
        waiting = [batcher_module._Pending(a_row(world.tenant, f"q{i}")) for i in range(5)]
        small._queue.extend(waiting)
        left: list[int] = []
        steps.on["commit"] = lambda _name: left.append(len(small._queue))
        small.record(world.tenant, "api", "queued", "read", detail="mine", timeout=SHORT)
    finally:
        small.close()
    assert left == [4, 2, 0]
    assert details(world) == sorted(["mine", "q0", "q1", "q2", "q3", "q4"])


def test_close_refuses_new_rows_and_closes_the_connection_no_leader_holds(
        world: World, steps: Steps) -> None:
    unused = AuditBatcher(world.engine)
    unused.close()  # it never opened a connection: nothing to close
    with pytest.raises(RuntimeError, match="^the audit batcher is stopped$"):
        unused.record(world.tenant, "api", "r", "read", detail="refused", timeout=SHORT)

    busy = AuditBatcher(world.engine)
    busy.record(world.tenant, "api", "r", "read", detail="first", timeout=SHORT)
    conn = busy._conn
    assert conn is not None and not conn.closed
    leader, release = start_held(world, busy, steps)  # a leader about to use it
    busy.close()
    assert busy._conn is conn and not conn.closed
    with pytest.raises(RuntimeError, match="^the audit batcher is stopped$"):
        busy.record(world.tenant, "api", "r", "read", detail="refused", timeout=SHORT)
    release.set()
    assert leader.finish() is None and leader.durable is True
    conn.close()  # the batcher, stopped, no longer closes it

    idle = AuditBatcher(world.engine)
    idle.record(world.tenant, "api", "r", "read", detail="last", timeout=SHORT)
    conn = idle._conn
    assert conn is not None
    idle.close()
    assert (idle._conn, conn.closed) == (None, True)
    assert details(world) == ["first", "last", "leader"]


def test_the_sqlite_connection_goes_back_to_the_pool_as_the_engine_made_it(
        world: World) -> None:
    """The engine's SQLite connections leave transactions to SQLAlchemy (the driver's
    ``isolation_level`` None); the batcher's, closed, must come back that way."""
    b = AuditBatcher(world.engine)
    b.record(world.tenant, "api", "r", "read", detail="one", timeout=SHORT)
    b.close()
    raw = world.engine.raw_connection()  # the pool hands back the one returned last
    try:
        assert raw.driver_connection.isolation_level is None
    finally:
        raw.close()


def test_a_refused_sqlite_insert_rolls_back_whole_and_leaves_its_connection_usable(
        world: World) -> None:
    batch = [a_row(world.tenant, "good-1"), a_row(uuid.uuid4(), "bad"),
             a_row(world.tenant, "good-2")]
    with world.engine.connect() as conn:
        driver = conn.connection.driver_connection
        with pytest.raises(sa_exc.IntegrityError) as raised:
            batcher_module._insert_sqlite(conn, batch)
        assert driver.in_transaction is False
        assert isinstance(raised.value.orig, sqlite3.IntegrityError)
        assert raised.value.statement == batcher_module._SQLITE_INSERT.string
        batcher_module._insert_sqlite(conn, [a_row(world.tenant, "after")])
        assert driver.in_transaction is False
    assert details(world) == ["after"]
    assert all_rows(world) == [
        (world.tenant, None, None, "api", "queued", None, "read", True, "after", None, AT,
         None)]
