"""The rows ``control_plane/audit/service.py`` records: every column of a success row, a
failure row, a bulk insert, the reads committed together, and ``audited``'s failure rows
with the private strings cut out. Embedded SQLite, no server (``checkpoint_world.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.audit import service as audit
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog
from control_plane.errors import InvalidInput
from control_plane.identity import Actor
from control_plane.kit import request_id_var
from tests.unit.checkpoint_world import World, make_world

POINTER = uuid.UUID("00000000-0000-0000-0000-00000000000a")
EVENT = uuid.UUID("00000000-0000-0000-0000-00000000000b")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def actor(world: World) -> Actor:
    return Actor(world.tenant, "agent", "key-1", "agent-7")


def rows(world: World) -> list[tuple[Any, ...]]:
    with world.sessions() as session:
        return [tuple(r) for r in session.execute(
            select(AccessLog.tenant_id, AccessLog.pointer_id, AccessLog.event_id,
                   AccessLog.accessor_type, AccessLog.accessor_id, AccessLog.agent_id,
                   AccessLog.operation, AccessLog.success, AccessLog.detail,
                   AccessLog.request_id, AccessLog.seq).order_by(AccessLog.id))]


def times(world: World) -> list[datetime]:
    with world.sessions() as session:
        return [t.replace(tzinfo=UTC) if t.tzinfo is None else t for t in session.scalars(
            select(AccessLog.accessed_at).order_by(AccessLog.id))]


@pytest.fixture
def request_id() -> Iterator[str]:
    token = request_id_var.set("req-42")
    yield "req-42"
    request_id_var.reset(token)


def test_record_writes_every_column_and_cuts_the_detail_at_2000(
        world: World, request_id: str) -> None:
    before = datetime.now(UTC)
    with world.sessions() as session:
        begin_write(session)
        audit.record(session, actor(world), "write", pointer_id=POINTER, event_id=EVENT,
                     detail="d" * 2001)
        audit.record(session, Actor(world.tenant, "api", "k2"), "read", success=False)
        session.commit()
    after = datetime.now(UTC)
    assert rows(world) == [
        (world.tenant, POINTER, EVENT, "agent", "key-1", "agent-7", "write", True, "d" * 2000,
         "req-42", None),
        (world.tenant, None, None, "api", "k2", None, "read", False, "", "req-42", None)]
    assert all(before <= t <= after for t in times(world))


def test_record_many_inserts_one_row_per_entry_at_one_time(world: World,
                                                           request_id: str) -> None:
    with world.sessions() as session:
        begin_write(session)
        audit.record_many(session, actor(world), "delete", [])
        session.commit()
    assert rows(world) == []
    with world.sessions() as session:
        begin_write(session)
        audit.record_many(session, actor(world), "delete",
                          [(POINTER, "first"), (None, "x" * 2001)])
        session.commit()
    assert rows(world) == [
        (world.tenant, POINTER, None, "agent", "key-1", "agent-7", "delete", True, "first",
         "req-42", None),
        (world.tenant, None, None, "agent", "key-1", "agent-7", "delete", True, "x" * 2000,
         "req-42", None)]
    first, second = times(world)
    assert first == second


def test_a_failure_row_lands_alone_the_failed_change_rolled_back(world: World) -> None:
    with world.sessions() as session:
        begin_write(session)
        audit.record(session, actor(world), "write", detail="never committed")
        audit.record_failure(session, actor(world), "write", detail="refused",
                             pointer_id=POINTER)
        assert not session.in_transaction()
    assert rows(world) == [(world.tenant, POINTER, None, "agent", "key-1", "agent-7", "write",
                            False, "refused", None, None)]


def test_audited_writes_no_row_when_the_block_succeeds(world: World) -> None:
    with world.sessions() as session:
        with audit.audited(session, actor(world), "write", detail="d"):
            pass
    assert rows(world) == []


def test_audited_records_a_domain_error_once_with_the_private_strings_cut(
        world: World) -> None:
    error = InvalidInput("no memory at scope user/u-1 with key k/9 (k%2F9)")
    with world.sessions() as session, pytest.raises(InvalidInput) as raised:
        with audit.audited(session, actor(world), "read", detail="user", pointer_id=POINTER,
                           private=["u-1", None, "k/9"]):
            raise error
    assert raised.value is error and error.audited is True
    with world.sessions() as session, pytest.raises(InvalidInput):
        with audit.audited(session, actor(world), "read", detail="outer"):
            raise error  # already audited by the inner block: no second row
    assert rows(world) == [(world.tenant, POINTER, None, "agent", "key-1", "agent-7", "read",
                            False, "user validation_error: no memory at scope user/… "
                                   "with key … (…)", None, None)]


def test_audited_without_a_detail_writes_the_reason_alone(world: World) -> None:
    with world.sessions() as session, pytest.raises(InvalidInput):
        with audit.audited(session, actor(world), "read"):
            raise InvalidInput("bad")
    with world.sessions() as session, pytest.raises(KeyError):
        with audit.audited(session, actor(world), "search"):
            raise KeyError("secret value")
    assert [(r[6], r[7], r[8]) for r in rows(world)] == [
        ("read", False, "validation_error: bad"), ("search", False, "error: KeyError")]


def test_audited_records_any_other_error_by_its_type_only(world: World) -> None:
    with world.sessions() as session, pytest.raises(RuntimeError, match="content"):
        with audit.audited(session, actor(world), "export", detail="job", pointer_id=POINTER):
            raise RuntimeError("content of a memory")
    assert rows(world) == [(world.tenant, POINTER, None, "agent", "key-1", "agent-7", "export",
                            False, "job error: RuntimeError", None, None)]


def test_audited_raises_the_original_error_when_its_row_cannot_be_written(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    with world.sessions() as session:
        session.close()
        world.engine.dispose()
        (world.settings.data_dir / "memplane.db").rename(world.settings.data_dir / "gone")
        session.bind = None  # type: ignore[assignment]
        with pytest.raises(RuntimeError, match="original"):
            with audit.audited(session, actor(world), "export"):
                raise RuntimeError("original")
    assert "could not audit a failed export" in caplog.text
    warning, = (r for r in caplog.records if r.getMessage() == "could not audit a failed export")
    assert isinstance(warning.exc_info, tuple)  # why the row could not be written


class Batcher:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def record_operations(self, tenant_id: uuid.UUID, accessor_type: str, accessor_id: str,
                          rows: list[Any], *, agent_id: str | None) -> None:
        self.calls.append((tenant_id, accessor_type, accessor_id, list(rows), agent_id))


def test_commit_reads_without_a_batcher_commits_the_rows_in_the_session(world: World) -> None:
    with world.sessions() as session:
        audit.commit_reads(session, world.plane, actor(world),
                           [("read", POINTER, "a"), ("search", None, "b")])
        assert not session.in_transaction()
    assert [(r[1], r[6], r[7], r[8]) for r in rows(world)] == [
        (POINTER, "read", True, "a"), (None, "search", True, "b")]


def test_commit_reads_with_a_batcher_ends_the_sessions_transaction_and_hands_them_over(
        world: World) -> None:
    batcher = Batcher()
    world.plane.audit_batcher = batcher  # type: ignore[assignment]
    with world.sessions() as session:
        begin_write(session)
        audit.record(session, actor(world), "write", detail="pending")
        audit.commit_reads(session, world.plane, actor(world), [("read", POINTER, "a")])
        assert not session.in_transaction()
        audit.commit_reads(session, world.plane, actor(world), [("read", None, "b")])
    assert [r[8] for r in rows(world)] == ["pending"]
    assert batcher.calls == [
        (world.tenant, "agent", "key-1", [("read", POINTER, "a")], "agent-7"),
        (world.tenant, "agent", "key-1", [("read", None, "b")], "agent-7")]


def test_reads_gathered_in_a_block_are_committed_once_at_its_end(world: World) -> None:
    batcher = Batcher()
    world.plane.audit_batcher = batcher  # type: ignore[assignment]
    other = Actor(world.tenant, "api", "other")
    with world.sessions() as session:
        with audit.reads_committed_together(session, world.plane, actor(world)):
            audit.commit_reads(session, world.plane, actor(world), [("read", POINTER, "a")])
            with audit.reads_committed_together(session, world.plane, actor(world)):
                audit.commit_reads(session, world.plane, actor(world), [("search", None, "b")])
            assert batcher.calls == []
            audit.commit_reads(session, world.plane, other, [("read", None, "c")])
            assert len(batcher.calls) == 1  # another actor's rows are not gathered
        with audit.reads_committed_together(session, world.plane, actor(world)):
            pass  # nothing read: nothing committed
    assert batcher.calls == [
        (world.tenant, "api", "other", [("read", None, "c")], None),
        (world.tenant, "agent", "key-1", [("read", POINTER, "a"), ("search", None, "b")],
         "agent-7")]
    with world.sessions() as session:  # the block is over: rows go straight through
        audit.commit_reads(session, world.plane, actor(world), [("read", None, "d")])
    assert batcher.calls[-1][3] == [("read", None, "d")]


def test_reads_gathered_are_committed_when_the_block_fails(world: World) -> None:
    batcher = Batcher()
    world.plane.audit_batcher = batcher  # type: ignore[assignment]
    with world.sessions() as session, pytest.raises(RuntimeError):
        with audit.reads_committed_together(session, world.plane, actor(world)):
            audit.commit_reads(session, world.plane, actor(world), [("read", POINTER, "a")])
            raise RuntimeError("the answer failed")
    with world.sessions() as session, pytest.raises(RuntimeError):
        with audit.reads_committed_together(session, world.plane, actor(world)):
            raise RuntimeError("nothing read")
    assert batcher.calls == [(world.tenant, "agent", "key-1", [("read", POINTER, "a")],
                              "agent-7")]
    with world.sessions() as session:  # both blocks are over: nothing gathers any more
        audit.commit_reads(session, world.plane, actor(world), [("read", None, "d")])
    assert len(batcher.calls) == 2


def test_a_failed_blocks_reads_that_cannot_be_committed_leave_the_original_error(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Batcher):
        def record_operations(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("the database is gone")

    world.plane.audit_batcher = Broken()  # type: ignore[assignment]
    with world.sessions() as session, pytest.raises(RuntimeError, match="answer"):
        with audit.reads_committed_together(session, world.plane, actor(world)):
            audit.commit_reads(session, world.plane, actor(world), [("read", POINTER, "a")])
            raise RuntimeError("the answer failed")
    assert "could not commit the audit rows of a failed request's reads" in caplog.text
