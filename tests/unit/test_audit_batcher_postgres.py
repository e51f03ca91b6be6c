"""The read-audit batcher's PostgreSQL paths (``control_plane/audit/batcher.py``), on a
throwaway cluster of its own (or ``MEMPLANE_TEST_DATABASE_URL``) with ``--noconftest``: a lone
row in one statement on a pooled connection, a batch in ONE statement of one array per column
on the batcher's own connection in autocommit, ``record_operations`` in one statement, a batch
refused whole, and a connection the server closed between two batches (retried once on a
fresh one)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, text

from control_plane.audit import batcher as batcher_module
from control_plane.audit.batcher import AuditBatcher
from control_plane.kit import request_id_var
from tests.unit import test_audit_batcher_cases as cases
from tests.unit.batcher_steps import (
    SHORT,
    Steps,
    all_rows,
    details,
    queue,
    start_held,
)
from tests.unit.checkpoint_world import World, postgres_cluster, postgres_world
from tests.unit.test_audit_batcher_cases import log_lines

cluster = pytest.fixture(scope="module")(postgres_cluster)
world = pytest.fixture(postgres_world)
steps, batcher, at = cases.steps, cases.batcher, cases.at  # the SQLite cases', on this world

# The SQLite cases that hold nothing of SQLite's own, run again on PostgreSQL (its batches go
# in as one array statement on the batcher's autocommit connection).
test_the_leader_hands_off_and_every_read_waits_for_its_row = (
    cases.test_the_leader_hands_off_to_the_first_queued_read_and_every_read_waits_for_its_row)
test_a_read_whose_wait_runs_out_in_the_queue_is_refused = (
    cases.test_a_read_whose_wait_runs_out_in_the_queue_is_refused_and_its_row_never_lands)
test_a_read_whose_wait_runs_out_while_its_row_is_being_committed_waits_for_it = (
    cases.test_a_read_whose_wait_runs_out_while_its_row_is_being_committed_waits_for_it)


@pytest.fixture
def statements(world: World) -> Iterator[list[str]]:
    """The audit inserts SQLAlchemy executes (``direct.run`` goes to the driver itself)."""
    seen: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("INSERT INTO access_logs"):
            seen.append(statement)

    event.listen(world.engine, "before_cursor_execute", before)
    yield seen
    event.remove(world.engine, "before_cursor_execute", before)


def _backend_pid(batcher: AuditBatcher) -> int:
    conn = batcher._conn
    assert conn is not None
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def test_a_lone_row_goes_in_alone_and_a_batch_in_one_array_statement_in_autocommit(
        world: World, batcher: AuditBatcher, steps: Steps, at: datetime,
        statements: list[str]) -> None:
    assert world.engine.dialect.name == "postgresql"
    pointer, other = uuid.uuid4(), uuid.uuid4()
    token = request_id_var.set("req-1")
    try:
        batcher.record(world.tenant, "agent", "key:k1", "read", pointer_id=pointer,
                       detail="x" * 2500, agent_id="bot", timeout=SHORT)
    finally:
        request_id_var.reset(token)
    assert statements == []  # one statement on a pooled connection, not the batcher's
    assert batcher._conn is not None
    assert batcher._conn.connection.driver_connection.autocommit is True

    leader, release = start_held(world, batcher, steps)
    f1, f2 = queue(world, batcher, steps, "f1", "f2",
                   f2={"pointer_id": other, "agent_id": "bot", "request_id": "req-2"})
    release.set()
    assert [r.finish() for r in (leader, f1, f2)] == [None, None, None]
    assert [r.durable for r in (leader, f1, f2)] == [True, True, True]
    me = threading.current_thread().name
    assert steps.names("commit") == [me, leader.name, f1.name]  # 1 row, 1 row, then 2
    expected = str(batcher_module._INSERT_MANY.compile(dialect=world.engine.dialect))
    assert statements == [expected]
    assert batcher._conn.connection.driver_connection.autocommit is True
    assert all_rows(world) == [
        (world.tenant, pointer, None, "agent", "key:k1", "bot", "read", True, "x" * 2000,
         "req-1", at, None),
        (world.tenant, None, None, "api", "reader", None, "read", True, "leader", None, at,
         None),
        (world.tenant, None, None, "api", "reader", None, "read", True, "f1", None, at, None),
        (world.tenant, other, None, "api", "reader", "bot", "read", True, "f2", "req-2", at,
         None)]


def test_record_operations_land_in_one_statement_committed_on_its_own(
        world: World, batcher: AuditBatcher, steps: Steps, at: datetime,
        statements: list[str]) -> None:
    p1 = uuid.uuid4()
    batcher.record_operations(world.tenant, "api", "key:j",
                              [("search", None, "q"), ("read", p1, "y" * 2001)],
                              agent_id="bot")
    batcher.record_many(world.tenant, "api", "key:j", "read", [(None, "z")])
    batcher.record_operations(world.tenant, "api", "key:j", [])
    assert (steps.seen, statements, batcher._conn) == ([], [], None)
    assert all_rows(world) == [
        (world.tenant, None, None, "api", "key:j", "bot", "search", True, "q", None, at, None),
        (world.tenant, p1, None, "api", "key:j", "bot", "read", True, "y" * 2000, None, at,
         None),
        (world.tenant, None, None, "api", "key:j", None, "read", True, "z", None, at, None)]


def test_a_refused_batch_fails_every_read_in_it_without_a_retry(
        world: World, batcher: AuditBatcher, steps: Steps,
        caplog: pytest.LogCaptureFixture) -> None:
    refused = cases.refused_batch(world, batcher, steps, caplog)
    assert isinstance(refused.orig, psycopg.errors.ForeignKeyViolation)


def test_a_batch_on_a_connection_the_server_closed_commits_on_a_fresh_one(
        world: World, batcher: AuditBatcher, steps: Steps,
        caplog: pytest.LogCaptureFixture) -> None:
    """The batcher keeps one connection for its batches; the server (a restart, an idle
    timeout, an operator) may close it between two. The next batch must not fail the reads
    because of a connection that was already gone before it started."""
    caplog.set_level(logging.INFO, logger=batcher_module.__name__)

    def batch_of_two(first: str, second: str) -> None:
        leader, release = start_held(world, batcher, steps, first, step="queued")
        [other] = queue(world, batcher, steps, second)
        release.set()
        assert (leader.finish(), other.finish()) == (None, None)
        assert (leader.durable, other.durable) == (True, True)

    batch_of_two("one", "two")
    old_pid = _backend_pid(batcher)
    with world.engine.connect() as conn:
        assert conn.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": old_pid})
        conn.commit()
    batch_of_two("three", "four")
    assert details(world) == ["four", "one", "three", "two"]
    assert _backend_pid(batcher) != old_pid
    assert log_lines(caplog) == [
        ("INFO", "audit batch: the connection was closed; retrying on a fresh one")]
