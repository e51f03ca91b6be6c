"""Sealing and verifying the audit chain (``control_plane/audit/service.py``): the order rows
are sealed in, their links and hashes against the chain's own functions, the tree grown with
them, what ``verify`` reports for each kind of damage, and the audit log's pages. Embedded
SQLite and a local bucket, no server (``checkpoint_world.py``)."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from base64 import b64encode
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from control_plane.audit import service as audit
from control_plane.audit import tree
from control_plane.audit.chain import GENESIS, chain_hash
from control_plane.audit.leaves import leaf_bytes
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditHead, AuditTile, Tenant
from control_plane.errors import InvalidInput
from control_plane.identity import Actor
from control_plane.kit import encode_cursor
from tests.unit.checkpoint_world import World, at, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def headless(world: World) -> uuid.UUID:
    """A tenant whose chain head is missing (made straight in the table)."""
    with world.sessions() as session:
        tenant = Tenant(name=f"t-{uuid.uuid4().hex[:8]}")
        session.add(tenant)
        session.commit()
        return tenant.id


def add(world: World, details: list[str], tenant: uuid.UUID | None = None) -> None:
    with world.sessions() as session:
        begin_write(session)
        for detail in details:
            audit.record(session, Actor(tenant or world.tenant, "api", "k"), "write",
                         detail=detail)
        session.commit()


def chain(world: World, tenant: uuid.UUID | None = None) -> list[AccessLog]:
    with world.sessions() as session:
        found = list(session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == (tenant or world.tenant)).order_by(AccessLog.id)))
        session.expunge_all()
        return found


def root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + root(leaves[:k]) + root(leaves[k:])).digest()


def assert_sealed_in_order(world: World, details: list[str]) -> None:
    rows = chain(world)
    assert [(r.seq, r.detail) for r in rows] == list(enumerate(details, 1))
    prev = GENESIS
    for row in rows:
        assert (row.prev_hash, row.row_hash) == (prev, chain_hash(prev, row))
        prev = str(row.row_hash)
    head = world.head()
    assert (head.last_seq, head.last_hash, head.tree_size) == (len(rows), prev, len(rows))
    with world.sessions() as session:
        size, top = tree.head(session, world.tenant)
    assert (size, top) == (len(rows), root(
        [hashlib.sha256(b"\x00" + leaf_bytes(r)).digest() for r in rows]))


def test_seal_chains_rows_in_insertion_order_and_grows_the_tree(world: World) -> None:
    add(world, ["a", "b", "c"])
    before = datetime.now(UTC)
    with world.sessions() as session:
        assert audit.seal(session, world.tenant) == 3
        assert not session.in_transaction()
    assert_sealed_in_order(world, ["a", "b", "c"])
    sealed_at = world.head().sealed_at
    assert sealed_at is not None and before <= sealed_at.replace(tzinfo=UTC) <= datetime.now(UTC)
    add(world, ["d"])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant) == 1
        assert audit.seal(session, world.tenant) == 0
    assert_sealed_in_order(world, ["a", "b", "c", "d"])


def test_seal_in_batches_seals_every_row(world: World) -> None:
    add(world, [str(i) for i in range(5)])
    steps: list[str] = []
    audit.checkpoint = steps.append
    try:
        with world.sessions() as session:
            assert audit.seal(session, world.tenant, batch=2) == 5
    finally:
        audit.checkpoint = audit._no_checkpoint
    assert steps == ["seal:rows-read"] * 3
    assert_sealed_in_order(world, [str(i) for i in range(5)])
    add(world, ["5", "6"])
    with world.sessions() as session:  # exactly one batch: one more round finds nothing
        assert audit.seal(session, world.tenant, batch=2) == 2
    assert_sealed_in_order(world, [str(i) for i in range(7)])


def test_a_chain_sealed_without_the_tree_has_it_built_at_the_next_seal(world: World) -> None:
    add(world, [str(i) for i in range(5)])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant, with_tree=False) == 5
    assert (world.head().last_seq, world.head().tree_size) == (5, 0)
    add(world, ["5"])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant, batch=2) == 1
    assert_sealed_in_order(world, [str(i) for i in range(6)])


def test_a_tree_that_cannot_catch_up_leaves_the_chain_sealing(world: World) -> None:
    add(world, ["a", "b"])
    with world.sessions() as session:
        audit.seal(session, world.tenant, with_tree=False)
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AccessLog).where(AccessLog.seq == 1).values(detail="edited"))
        session.commit()
    add(world, ["c"])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant) == 1
    rows = chain(world)
    assert [r.seq for r in rows] == [1, 2, 3]
    assert rows[2].prev_hash == rows[1].row_hash
    assert rows[2].row_hash == chain_hash(str(rows[1].row_hash), rows[2])
    assert (world.head().last_seq, world.head().tree_size) == (3, 0)


def test_a_tree_whose_tiles_are_gone_stops_growing_and_the_chain_seals_on(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    add(world, ["a", "b", "c"])
    with world.sessions() as session:
        audit.seal(session, world.tenant)
    change(world, delete(AuditTile).where(AuditTile.tenant_id == world.tenant))
    add(world, ["d"])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant) == 1
    assert (world.head().last_seq, world.head().tree_size) == (4, 3)
    assert "was not grown: its tiles disagree with its size" in caplog.text
    assert verify(world).ok


def test_seal_of_a_tenant_without_a_head_seals_nothing(world: World) -> None:
    stranger = headless(world)
    add(world, ["x"], tenant=stranger)
    with world.sessions() as session:
        assert audit.seal(session, stranger) == 0
        assert not session.in_transaction()
    assert [r.seq for r in chain(world, stranger)] == [None]


def test_seal_all_seals_each_tenant_and_builds_trees_behind(world: World) -> None:
    second, third = world.new_tenant(), world.new_tenant()
    add(world, ["a", "b"])
    add(world, ["c"], tenant=second)
    add(world, ["d", "e"], tenant=third)
    with world.sessions() as session:
        audit.seal(session, third, with_tree=False)
        assert audit.seal_all(session) == 3
    assert [(world.head(t).last_seq, world.head(t).tree_size)
            for t in (world.tenant, second, third)] == [(2, 2), (1, 1), (2, 2)]


# --- verify --------------------------------------------------------------------------------

def sealed_world(world: World, n: int = 5) -> None:
    add(world, [f"row {i}" for i in range(1, n + 1)])
    with world.sessions() as session:
        audit.seal(session, world.tenant)


def verify(world: World, chunk: int = 2) -> audit.Verification:
    with world.sessions() as session:
        return audit.verify(session, world.tenant, chunk=chunk)


def change(world: World, statement: Any) -> None:
    with world.sessions() as session:
        begin_write(session)
        session.execute(statement)
        session.commit()


def test_a_sound_chain_verifies_in_chunks_counting_unsealed_rows(world: World) -> None:
    sealed_world(world, 5)
    add(world, ["late"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        verify(world).ok = False  # type: ignore[misc]
    for chunk in (1, 2, 5, 6, 5000):
        assert verify(world, chunk) == audit.Verification(True, 5, 1, None, head_seq=5)
    sealed_world(world, 3)
    assert verify(world, 4) == audit.Verification(True, 9, 0, None, head_seq=9)


def test_a_report_without_the_plane_has_every_checkpoint_field_at_zero(world: World) -> None:
    sealed_world(world, 2)
    with world.sessions() as session:
        unknown = audit.verify(session, uuid.uuid4())
    assert dataclasses.astuple(verify(world)) == (
        True, 2, 0, None, None, 0, None, None, None, 2, 0, None, None, 0, 0, ())
    with world.sessions() as session:  # the chain alone unless both are given
        assert audit.verify(session, world.tenant, settings=world.settings) == verify(world)
        assert audit.verify(session, world.tenant, plane=world.plane) == verify(world)
    assert dataclasses.astuple(unknown) == (
        True, 0, 0, None, None, 0, None, None, None, 0, 0, None, None, 0, 0, ())


def test_an_empty_chain_and_an_unknown_tenant_verify(world: World) -> None:
    assert verify(world) == audit.Verification(True, 0, 0, None, head_seq=0)
    with world.sessions() as session:
        assert audit.verify(session, uuid.uuid4()) == audit.Verification(True, 0, 0, None)


def test_an_unknown_tenant_with_rows_is_a_chain_without_a_head(world: World) -> None:
    stranger = headless(world)
    add(world, ["x"], tenant=stranger)
    with world.sessions() as session:
        assert audit.verify(session, stranger) == audit.Verification(True, 0, 1, None)


@pytest.mark.parametrize("column, value", [
    ("detail", "edited"), ("success", False), ("operation", "read"), ("agent_id", "a")])
def test_an_edited_row_is_named(world: World, column: str, value: Any) -> None:
    sealed_world(world)
    change(world, update(AccessLog).where(AccessLog.seq == 3).values({column: value}))
    assert verify(world) == audit.Verification(
        False, 2, 0, 3, "row 3 was changed after it was sealed", head_seq=5)


def test_a_deleted_row_leaves_a_gap(world: World) -> None:
    sealed_world(world)
    change(world, delete(AccessLog).where(AccessLog.seq == 2))
    assert verify(world) == audit.Verification(False, 1, 0, 2, "row 2 is missing", head_seq=5)
    change(world, delete(AccessLog).where(AccessLog.seq == 1))
    assert verify(world) == audit.Verification(False, 0, 0, 1, "row 1 is missing", head_seq=5)


def test_a_deleted_last_row_disagrees_with_the_head(world: World) -> None:
    sealed_world(world)
    change(world, delete(AccessLog).where(AccessLog.seq == 5))
    for chunk in (2, 4, 5):
        assert verify(world, chunk) == audit.Verification(
            False, 4, 0, 5, "the chain ends at row 4 but was sealed up to 5", head_seq=5)


def test_a_row_inserted_after_the_head_and_a_head_set_back_are_named(world: World) -> None:
    sealed_world(world, 4)
    last = chain(world)[-1]
    change(world, update(AuditHead).where(AuditHead.tenant_id == world.tenant)
           .values(last_seq=3))
    assert verify(world) == audit.Verification(
        False, 4, 0, 5, "the chain ends at row 4 but was sealed up to 3", head_seq=3)
    change(world, update(AuditHead).where(AuditHead.tenant_id == world.tenant)
           .values(last_seq=4, last_hash="f" * 64))
    assert verify(world) == audit.Verification(
        False, 4, 0, 5, "the chain ends at row 4 but was sealed up to 4", head_seq=4)
    change(world, update(AuditHead).where(AuditHead.tenant_id == world.tenant)
           .values(last_hash=last.row_hash))
    assert verify(world).ok


def test_a_row_inserted_in_the_middle_breaks_the_link(world: World) -> None:
    sealed_world(world, 4)
    rows = chain(world)
    change(world, update(AccessLog).where(AccessLog.seq >= 3).values(seq=AccessLog.seq + 10))
    add(world, ["inserted"])
    forged = chain(world)[-1]
    change(world, update(AccessLog).where(AccessLog.id == forged.id).values(
        seq=3, prev_hash=rows[1].row_hash))
    forged.seq = 3
    change(world, update(AccessLog).where(AccessLog.id == forged.id).values(
        row_hash=chain_hash(str(rows[1].row_hash), forged)))
    change(world, update(AccessLog).where(AccessLog.seq == 13).values(seq=4))
    assert verify(world) == audit.Verification(
        False, 3, 0, 4, "row 4 does not follow row 3", head_seq=4)


def test_two_rows_swapped_break_the_link(world: World) -> None:
    sealed_world(world, 4)
    change(world, update(AccessLog).where(AccessLog.seq == 2).values(seq=-2))
    change(world, update(AccessLog).where(AccessLog.seq == 3).values(seq=2))
    change(world, update(AccessLog).where(AccessLog.seq == -2).values(seq=3))
    assert verify(world) == audit.Verification(
        False, 1, 0, 2, "row 2 does not follow row 1", head_seq=4)


def test_verify_with_the_plane_holds_the_chain_to_its_checkpoints(world: World) -> None:
    sealed_world(world, 3)
    assert world.anchor(at(0))
    with world.sessions() as session:
        got = audit.verify(session, world.tenant, plane=world.plane, settings=world.settings)
    assert (got.ok, got.checked, got.head_seq, got.checkpoints_checked, got.first_checkpoint_seq,
            got.last_checkpoint_seq, got.first_bad_checkpoint, got.anchored_seq,
            got.anchor_lag_seconds, got.anchors_checked, got.anchor_moves,
            got.anchors_unreadable) == (True, 3, 3, 1, 3, 3, None, 3, None, 1, 0, ())
    sealed_world(world, 1)
    before = datetime.now(UTC)
    with world.sessions() as session:
        got = audit.verify(session, world.tenant, plane=world.plane, settings=world.settings)
    lag = (before - at(0)).total_seconds()
    assert got.ok and got.head_seq == 4 and got.anchored_seq == 3
    assert got.anchor_lag_seconds is not None and lag <= got.anchor_lag_seconds < lag + 60
    change(world, update(AuditHead).where(AuditHead.tenant_id == world.tenant)
           .values(anchored_at=None))
    with world.sessions() as session:
        got = audit.verify(session, world.tenant, plane=world.plane, settings=world.settings)
    assert got.ok and got.anchor_lag_seconds is None


def test_verify_with_the_plane_reports_a_chain_rewritten_past_its_checkpoint(
        world: World) -> None:
    sealed_world(world, 3)
    assert world.anchor(at(0))
    rows = chain(world)
    prev = GENESIS
    with world.sessions() as session:  # rewrite every row and the head consistently
        begin_write(session)
        for row in rows:
            row.detail = f"{row.detail} rewritten"
            row.prev_hash, row.row_hash = prev, chain_hash(prev, row)
            prev = row.row_hash
            session.merge(row)
        session.execute(update(AuditHead).where(AuditHead.tenant_id == world.tenant)
                        .values(last_hash=prev))
        session.commit()
    assert verify(world).ok
    with world.sessions() as session:
        got = audit.verify(session, world.tenant, plane=world.plane, settings=world.settings)
        report = world.check()
    assert (got.ok, got.first_bad_seq, got.problem, got.first_bad_checkpoint) == (
        False, report.first_uncovered_row, report.problem, report.first_bad)
    assert report.problem is not None and got.checkpoints_checked == report.checked
    change(world, delete(AccessLog).where(AccessLog.seq == 2))
    with world.sessions() as session:
        got = audit.verify(session, world.tenant, plane=world.plane, settings=world.settings)
    assert (got.ok, got.first_bad_seq, got.problem) == (False, 2, "row 2 is missing")


# --- pages and the audit of auditing ---------------------------------------------------------

def test_query_page_seals_first_pages_by_seq_and_audits_itself(world: World) -> None:
    add(world, ["a", "b", "c"])
    me = Actor(world.tenant, "api", "reader")
    with world.sessions() as session:
        page, cursor = audit.query_page(
            session, me, pointer_id=None, accessor_id=None, operation=None, since=None,
            until=None, cursor=None, limit=2)
    rows = chain(world)
    assert [(r.seq, r.detail, r.leaf) for r in page] == [
        (row.seq, row.detail, b64encode(leaf_bytes(row)).decode()) for row in rows[:2]]
    assert cursor == encode_cursor({"seq": 2})
    with pytest.raises(dataclasses.FrozenInstanceError):
        page[0].detail = "shown otherwise"  # type: ignore[misc]
    assert rows[3].operation == "audit_query" and rows[3].detail == "operation=None -> 2"
    assert (rows[3].accessor_id, rows[3].success, rows[3].seq) == ("reader", True, None)
    with world.sessions() as session:
        page, cursor = audit.query_page(
            session, me, pointer_id=None, accessor_id=None, operation="write", since=None,
            until=None, cursor=cursor, limit=2)
    assert ([r.detail for r in page], cursor) == (["c"], None)
    assert chain(world)[-1].detail == "operation=write -> 1"


def test_a_page_that_holds_the_last_rows_exactly_has_no_next_cursor(world: World) -> None:
    add(world, ["a", "b"])
    with world.sessions() as session:
        page, cursor = audit.query_page(
            session, Actor(world.tenant, "api", "r"), pointer_id=None, accessor_id=None,
            operation="write", since=None, until=None, cursor=None, limit=2)
    assert ([r.detail for r in page], cursor) == (["a", "b"], None)


def test_query_page_reads_times_without_a_zone_as_utc(world: World) -> None:
    add(world, ["a"])
    when = chain(world)[0].accessed_at.replace(tzinfo=None)
    me = Actor(world.tenant, "api", "reader")
    with world.sessions() as session:
        hit, _ = audit.query_page(session, me, pointer_id=None, accessor_id=None,
                                  operation="write", since=when, until=None, cursor=None,
                                  limit=10)
        miss, _ = audit.query_page(session, me, pointer_id=None, accessor_id=None,
                                   operation="write", since=None, until=when, cursor=None,
                                   limit=10)
        late, _ = audit.query_page(session, me, pointer_id=None, accessor_id=None,
                                   operation="write", since=when + timedelta(seconds=1),
                                   until=None, cursor=None, limit=10)
    assert ([r.detail for r in hit], miss, late) == (["a"], [], [])


@pytest.mark.parametrize("value", [True, -1, 2**63, "1", None, [1], {"seq": 1, "x": 2}])
def test_a_cursor_that_no_page_wrote_is_refused(world: World, value: Any) -> None:
    cursor = encode_cursor(value if not isinstance(value, dict) else value)
    if not isinstance(value, dict) or len(value) == 1:
        cursor = encode_cursor({"seq": value})
    with world.sessions() as session, pytest.raises(InvalidInput, match="next_cursor"):
        audit.query_page(session, Actor(world.tenant, "api", "r"), pointer_id=None,
                         accessor_id=None, operation=None, since=None, until=None,
                         cursor=cursor, limit=10)
    with world.sessions() as session, pytest.raises(InvalidInput, match="next_cursor"):
        audit.query_page(session, Actor(world.tenant, "api", "r"), pointer_id=None,
                         accessor_id=None, operation=None, since=None, until=None,
                         cursor=encode_cursor(5), limit=10)


def test_the_largest_cursor_and_zero_are_accepted(world: World) -> None:
    add(world, ["a"])
    for after, shown in ((0, ["a"]), (2**63 - 1, [])):
        with world.sessions() as session:
            page, _ = audit.query_page(
                session, Actor(world.tenant, "api", "r"), pointer_id=None, accessor_id=None,
                operation="write", since=None, until=None,
                cursor=encode_cursor({"seq": after}), limit=10)
        assert [r.detail for r in page] == shown


def test_verify_as_records_its_outcome(world: World) -> None:
    sealed_world(world, 2)
    me = Actor(world.tenant, "api", "auditor")
    with world.sessions() as session:
        assert audit.verify_as(session, me).ok
    change(world, update(AccessLog).where(AccessLog.seq == 1).values(detail="x"))
    with world.sessions() as session:
        assert not audit.verify_as(session, me).ok
    rows = [r for r in chain(world) if r.operation == "audit_verify"]
    assert [(r.accessor_id, r.success, r.detail) for r in rows] == [
        ("auditor", True, "checked 2, unsealed 0, first bad None, checkpoints 0, first bad "
                          "checkpoint None"),
        ("auditor", False, "checked 0, unsealed 1, first bad 1, checkpoints 0, first bad "
                           "checkpoint None")]
