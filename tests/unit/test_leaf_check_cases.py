"""``leaf_check.leaves_agree``: the database's sealed rows held to the checkpoints' roots —
every root of 1 to 40 rows reproduced, other tenants' and unsealed rows left out, and the
exact report of a changed, a removed and a missing last row. The roots are computed here
from the rows' leaves by RFC 6962's MTH. Embedded SQLite (``checkpoint_world.py``)."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import delete, select, update

from control_plane.audit import service as audit
from control_plane.audit.leaf_check import LeafReport, leaves_agree
from control_plane.audit.leaves import leaf_bytes
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog
from control_plane.identity import Actor
from tests.unit.checkpoint_world import World, make_world

EMPTY = hashlib.sha256(b"").digest()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1, written plainly."""
    if not leaves:
        return EMPTY
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def leaves(world: World, tenant: uuid.UUID | None = None) -> list[bytes]:
    with world.sessions() as session:
        rows = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == (tenant or world.tenant), AccessLog.seq.is_not(None))
            .order_by(AccessLog.seq)).all()
        return [leaf_bytes(row) for row in rows]


def heads(world: World, *sizes: int) -> list[tuple[int, bytes]]:
    ours = leaves(world)
    return [(size, mth(ours[:size])) for size in sizes]


def agree(world: World, wanted: list[tuple[int, bytes]], chunk: int = 5000) -> LeafReport:
    with world.sessions() as session:
        report = leaves_agree(session, world.tenant, wanted, chunk=chunk)
        assert not session.in_transaction()
        return report


def change(world: World, seq: int) -> None:
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AccessLog).where(AccessLog.tenant_id == world.tenant,
                                                AccessLog.seq == seq).values(detail="changed"))
        session.commit()


def remove(world: World, *seqs: int) -> None:
    with world.sessions() as session:
        begin_write(session)
        session.execute(delete(AccessLog).where(AccessLog.tenant_id == world.tenant,
                                                AccessLog.seq.in_(seqs)))
        session.commit()


def test_the_rows_reproduce_every_root_from_1_to_40(world: World) -> None:
    world.append(40)
    other = world.new_tenant()
    world.append(45, other)  # another tenant's rows, and our own rows not sealed yet
    with world.sessions() as session:
        begin_write(session)
        audit.record(session, Actor(world.tenant, "api", "k"), "write", detail="unsealed")
        session.commit()
    assert agree(world, heads(world, *range(1, 41))) == LeafReport(40, 40)
    assert agree(world, heads(world, *range(1, 41)), chunk=7) == LeafReport(40, 40)
    assert agree(world, [(41, mth(leaves(world, other)[:41]))]) == LeafReport(
        40, 0, "the database holds 40 sealed rows, but checkpoint 41 signed 41: rows were "
        "removed")


def test_heads_are_taken_in_order_from_size_1_and_rows_past_the_last_are_not_read(
        world: World) -> None:
    world.append(12)
    assert agree(world, [*heads(world, 12, 3, 7, 1), (0, EMPTY)]) == LeafReport(12, 4)
    report = agree(world, heads(world, 7, 3))
    assert (report.rows, report.checkpoints, report.problem, report.ok) == (7, 2, None, True)
    assert agree(world, heads(world, 5)) == LeafReport(5, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.rows = 1  # type: ignore[misc]


def test_no_checkpoint_with_rows_checks_nothing(world: World) -> None:
    world.append(3)
    for wanted in ([], [(0, EMPTY)]):
        report = agree(world, wanted)
        assert (report.rows, report.checkpoints, report.problem, report.ok) == \
            (0, 0, None, True)


def test_a_changed_row_is_named_by_the_first_checkpoint_after_it(world: World) -> None:
    world.append(12)
    signed = heads(world, 3, 7, 12)
    change(world, 5)
    report = agree(world, signed)
    assert report == LeafReport(7, 1, (
        "the database's rows 1 to 7 are not the rows checkpoint 7 signed: a row after row 3 "
        "was changed"))
    assert not report.ok
    change(world, 2)
    assert agree(world, signed) == LeafReport(3, 0, (
        "the database's rows 1 to 3 are not the rows checkpoint 3 signed: a row after row 0 "
        "was changed"))


def test_a_removed_row_is_named_with_the_checkpoint_that_covers_it(world: World) -> None:
    world.append(12)
    signed = heads(world, 3, 7, 12)
    remove(world, 5)
    assert agree(world, signed) == LeafReport(4, 1, (
        "row 5 is missing from the database, but checkpoint 7 covers it: rows were removed"))
    remove(world, 1)
    assert agree(world, signed) == LeafReport(0, 0, (
        "row 1 is missing from the database, but checkpoint 3 covers it: rows were removed"))


def test_rows_removed_from_the_end_leave_the_last_checkpoints_unmatched(world: World) -> None:
    world.append(12)
    signed = heads(world, 3, 7, 10, 12)
    remove(world, 11, 12)
    assert agree(world, signed) == LeafReport(10, 3, (
        "the database holds 10 sealed rows, but checkpoint 12 signed 12: rows were removed"))
