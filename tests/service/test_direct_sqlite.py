"""The lookups on SQLite run straight on the driver (``db.direct.run_sqlite``): their rows
hold exactly the values SQLAlchemy gives for the same statement — ids, times, JSON tags,
keys and flags — whatever the memory holds, and a missing address answers as it does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from control_plane.db import direct
from control_plane.memories import hotpath
from control_plane.memories import service as memories
from control_plane.memories.addresses import MemoryAddress, Scope
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

pytestmark = pytest.mark.databases("sqlite")


def _both(world: ServiceWorld, statement: Any, params: dict[str, Any]
          ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str], list[str]]:
    engine = world.runtime.engine
    with engine.connect() as conn:
        result = conn.execute(statement, params)
        expected_keys = list(result.keys())
        expected = [tuple(row) for row in result.all()]
    rows = direct.run_sqlite(engine, statement, params)
    return [tuple(row) for row in rows], expected, list(rows[0]._fields) if rows else [], \
        expected_keys


def test_the_lookups_rows_are_sqlalchemys(world: ServiceWorld) -> None:
    addresses = [MemoryAddress.parse(Scope.user, "ann", "plain"),
                 MemoryAddress.parse(Scope.agent, "bot-1", "tagged"),
                 MemoryAddress.parse(Scope.user, "ann", "nowhere")]  # never written
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, addresses[0],
                           {"text": "café ☕"}, MemoryMeta())
        memories.set_value(session, world.runtime.plane, world.actor, addresses[1], [1, 2],
                           MemoryMeta(tags=["a", "ü"], importance=5, title="T",
                                      ttl_days=3, user_id="ann", memory_type="preference"))
    found = 0
    for address in addresses:
        for statement, extra in ((hotpath.LOOKUP_READ, {}),
                                 (hotpath.LOOKUP_WRITE, {"v_meta_user": "ann"})):
            params = hotpath._params(world.tenant_id, address) | extra
            got, expected, fields, keys = _both(world, statement, params)
            assert got == expected, (address, statement)
            if got:
                assert fields == keys
                found += 1
    assert found == 5  # both lookups of the two memories; the write lookup of the third
    rows = direct.run_sqlite(world.runtime.engine, hotpath.LOOKUP_READ,
                             hotpath._params(world.tenant_id, addresses[1]))
    (row,) = rows
    assert row.tags == ["a", "ü"] and row.importance == 5 and row.searchable is True
    assert abs(row.expires_at.replace(tzinfo=UTC) - datetime.now(UTC)
               - timedelta(days=3)) < timedelta(minutes=5)
