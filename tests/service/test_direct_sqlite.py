"""The lookups on SQLite run straight on the driver (``db.direct.run_sqlite``): their rows
hold exactly the values SQLAlchemy gives for the same statement — ids, times, JSON tags,
keys and flags — whatever the memory holds, and a missing address answers as it does."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db import direct
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.memories import hotpath, hotpath_commit
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.memories.write_request import address_params
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
            params = address_params(world.tenant_id, address) | extra
            got, expected, fields, keys = _both(world, statement, params)
            assert got == expected, (address, statement)
            if got:
                assert fields == keys
                found += 1
    assert found == 5  # both lookups of the two memories; the write lookup of the third
    rows = direct.run_sqlite(world.runtime.engine, hotpath.LOOKUP_READ,
                             address_params(world.tenant_id, addresses[1]))
    (row,) = rows
    assert row.tags == ["a", "ü"] and row.importance == 5 and row.searchable is True
    assert abs(row.expires_at.replace(tzinfo=UTC) - datetime.now(UTC)
               - timedelta(days=3)) < timedelta(minutes=5)


def test_a_row_written_on_the_driver_is_stored_as_the_orm_stores_it(
        world: ServiceWorld) -> None:
    values = {"tenant_id": world.tenant_id, "pointer_id": uuid.uuid4(),
              "accessor_type": "key", "accessor_id": "k1", "agent_id": None,
              "operation": "write", "success": True, "detail": "user:é",
              "request_id": "r-1", "accessed_at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)}
    engine = world.runtime.engine
    with engine.connect() as conn, conn.begin():
        assert direct.execute_sqlite(conn, hotpath_commit._SQLITE_AUDIT, values) == []
    with world.runtime.sessions() as session:
        session.add(AccessLog(**values))
        session.commit()
    columns = ", ".join(values)
    with engine.connect() as conn:
        stored = conn.exec_driver_sql(
            f"SELECT {columns} FROM access_logs WHERE request_id = 'r-1' ORDER BY id").all()
    assert len(stored) == 2
    assert tuple(stored[0]) == tuple(stored[1])  # the same text, bytes and numbers


def test_a_write_on_sqlite_reads_back_through_the_orm(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "bo", "prefs")
    with world.runtime.sessions() as session:
        first = memories.set_value(session, world.runtime.plane, world.actor, address,
                                   {"v": 1}, MemoryMeta(tags=["x", "ÿ"], ttl_days=2))
        second = memories.set_value(session, world.runtime.plane, world.actor, address,
                                    {"v": 2}, MemoryMeta(tags=["y"]))
    with world.runtime.sessions() as session:
        pointer = session.get(MemoryPointer, first.id)
        assert pointer is not None
        rows = session.scalars(select(AccessLog).where(AccessLog.pointer_id == first.id)
                               .order_by(AccessLog.id)).all()
        assert (pointer.id, pointer.version, pointer.tags) == (second.id, 2, ["y"])
        assert pointer.updated_at == second.updated_at and pointer.created_at.tzinfo is not None
        assert [(r.operation, r.success, r.pointer_id) for r in rows] == [
            ("write", True, first.id), ("write", True, first.id)]
        assert rows[1].accessed_at >= rows[0].accessed_at


def test_each_statements_parameters_are_what_construct_params_gives(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []
    lean = direct._SqliteStatement.parameters

    def recorded(self: Any, params: dict[str, Any]) -> list[Any]:
        seen.append((self, dict(params)))
        return lean(self, params)

    monkeypatch.setattr(direct._SqliteStatement, "parameters", recorded)
    address = MemoryAddress.parse(Scope.user, "cy", "notes")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, {"v": "é"},
                           MemoryMeta(tags=["t"], ttl_days=1, title="T", user_id="cy"))
        memories.set_value(session, world.runtime.plane, world.actor, address, [2],
                           MemoryMeta())
        memories.get_value(session, world.runtime.plane, world.actor, address)
    statements = {id(statement) for statement, _ in seen}
    assert len(statements) >= 4  # lookups, the write's checks, insert, update and audit row
    for statement, params in seen:
        assert statement.plan is not None, statement.sql
        values = statement.compiled.construct_params(params)
        slow = [values[name] if bind is None else bind(values[name])
                for name, bind in statement.binds]
        assert lean(statement, params) == slow, statement.sql


def test_a_statements_own_values_and_a_missing_parameter_are_as_construct_params_has_them(
        world: ServiceWorld) -> None:
    from sqlalchemy import bindparam, literal_column
    from sqlalchemy import exc as sa_exc

    statement = select(literal_column("1").label("one")).where(
        bindparam("a", type_=MemoryPointer.updated_at.type) != bindparam("b", value=7),
        bindparam("c", value="x", required=False) == bindparam("c2", required=True))
    prepared = direct._prepared(world.runtime.engine, statement)
    assert prepared.plan is not None
    at = datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=UTC)
    assert prepared.parameters({"a": at, "c2": "y"}) == [
        "2026-03-04 05:06:07.000008", 7, "x", "y"]
    assert prepared.parameters({"a": at, "b": 8, "c": "z", "c2": "y"}) == [
        "2026-03-04 05:06:07.000008", 8, "z", "y"]
    with pytest.raises(sa_exc.InvalidRequestError, match="'c2'"):
        prepared.parameters({"a": at})
    with pytest.raises(sa_exc.InvalidRequestError, match="'c2'"):
        prepared.compiled.construct_params({"a": at})
