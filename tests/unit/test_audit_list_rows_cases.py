"""The audit log's query (``control_plane/audit/repository.py``, ``list_rows``): the tenant's
sealed rows only, in chain order, each filter alone and together, the time bounds exactly
(``since`` included, ``until`` excluded), paging after a seq, and the limit. Embedded SQLite
(``checkpoint_world.py``), no server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from control_plane.audit import service as audit
from control_plane.audit.repository import list_rows
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog
from control_plane.identity import Actor
from tests.unit.checkpoint_world import World, at, make_world

P, Q = uuid.UUID(int=1), uuid.UUID(int=2)
# (accessor, operation, pointer, seconds after T0) of the tenant's rows, sealed as seq 1…5
ROWS = [("key:a", "read", P, 0), ("key:b", "write", P, 10), ("key:a", "write", None, 20),
        ("key:a", "read", Q, 30), ("key:b", "read", P, 40)]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def add(world: World, tenant: uuid.UUID, rows: list[tuple[str, str, uuid.UUID | None, int]],
        *, sealed: bool = True) -> None:
    with world.sessions() as session:
        begin_write(session)
        for i, (accessor, operation, pointer, _) in enumerate(rows):
            audit.record(session, Actor(tenant, "api", accessor), operation,
                         pointer_id=pointer, detail=f"{tenant.hex}-{i}-{sealed}")
        session.commit()
        begin_write(session)
        for i, (*_, seconds) in enumerate(rows):
            session.execute(update(AccessLog).where(
                AccessLog.detail == f"{tenant.hex}-{i}-{sealed}").values(
                accessed_at=at(seconds)))
        session.commit()
        if sealed:
            audit.seal(session, tenant)


@pytest.fixture
def tenants(world: World) -> tuple[uuid.UUID, uuid.UUID]:
    other = world.new_tenant()
    add(world, world.tenant, ROWS)
    add(world, other, [("key:a", "read", P, 0), ("key:a", "read", P, 20)])
    add(world, world.tenant, [("key:a", "read", P, 25)], sealed=False)
    return world.tenant, other


def seqs(world: World, tenant: uuid.UUID, **filters: Any) -> list[int | None]:
    values: dict[str, Any] = dict(pointer_id=None, accessor_id=None, operation=None,
                                  since=None, until=None, after_seq=None, limit=100)
    values.update(filters)
    with world.sessions() as session:
        return [row.seq for row in list_rows(session, tenant, **values)]


def test_every_sealed_row_of_the_tenant_in_chain_order(
        world: World, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    mine, other = tenants
    assert seqs(world, mine) == [1, 2, 3, 4, 5]  # not the unsealed row, not the other's
    assert seqs(world, other) == [1, 2]
    assert seqs(world, uuid.uuid4()) == []


def test_each_filter_alone(world: World, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    mine, _ = tenants
    assert seqs(world, mine, pointer_id=P) == [1, 2, 5]
    assert seqs(world, mine, pointer_id=Q) == [4]
    assert seqs(world, mine, accessor_id="key:a") == [1, 3, 4]
    assert seqs(world, mine, operation="read") == [1, 4, 5]
    assert seqs(world, mine, operation="erase") == []


def test_the_time_bounds_hold_since_and_leave_out_until(
        world: World, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    mine, _ = tenants
    assert seqs(world, mine, since=at(20)) == [3, 4, 5]
    assert seqs(world, mine, since=at(21)) == [4, 5]
    assert seqs(world, mine, until=at(30)) == [1, 2, 3]
    assert seqs(world, mine, until=at(31)) == [1, 2, 3, 4]
    assert seqs(world, mine, since=at(10), until=at(40)) == [2, 3, 4]
    assert seqs(world, mine, since=at(41)) == []


def test_paging_after_a_seq_and_the_limit(
        world: World, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    mine, _ = tenants
    assert seqs(world, mine, after_seq=2) == [3, 4, 5]
    assert seqs(world, mine, after_seq=0) == [1, 2, 3, 4, 5]
    assert seqs(world, mine, after_seq=5) == []
    assert seqs(world, mine, limit=2) == [1, 2]
    assert seqs(world, mine, after_seq=2, limit=2) == [3, 4]


def test_the_filters_together(world: World, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    mine, other = tenants
    assert seqs(world, mine, accessor_id="key:a", operation="read", pointer_id=P) == [1]
    assert seqs(world, mine, accessor_id="key:b", operation="read") == [5]
    assert seqs(world, other, pointer_id=P, since=at(10)) == [2]
    assert seqs(world, mine, operation="read", since=at(1), until=at(40),
                 after_seq=3) == [4]


def test_rows_come_back_whole(world: World, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    mine, _ = tenants
    with world.sessions() as session:
        [row] = list_rows(session, mine, pointer_id=Q, accessor_id=None, operation=None,
                          since=None, until=None, after_seq=None, limit=10)
        assert (row.tenant_id, row.seq, row.accessor_id, row.operation, row.pointer_id,
                row.accessed_at) == (mine, 4, "key:a", "read", Q, at(30))
        assert isinstance(row, AccessLog) and isinstance(row.accessed_at, datetime)
