"""Statements run straight on the driver: the same exceptions a Session raises, and
pipelined executions that answer in order and commit as asked."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import (
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy import exc as sa_exc

from control_plane.db import direct
from control_plane.db.engine import make_engine
from tests.support.emulators import free_port


def test_an_unreachable_database_is_sqlalchemys_operational_error() -> None:
    engine = make_engine(f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    try:
        with pytest.raises(sa_exc.OperationalError):
            direct.run(engine, select(literal(1)), {})
    finally:
        engine.dispose()


def _table(engine: Engine) -> Table:
    table = Table("pipelined", MetaData(), Column("id", Integer, primary_key=True),
                  Column("name", String, unique=True))
    table.create(engine)
    return table


def test_pipelined_executions_answer_in_order_and_commit_together(postgres: Any) -> None:
    engine = make_engine(postgres.create_database())
    try:
        table = _table(engine)
        statement = insert(table).values(id=bindparam("i"), name=bindparam("n")).returning(
            table.c.id, table.c.name)
        rows = direct.run_all(engine, statement, [{"i": i, "n": f"n{i}"} for i in range(50)])
        assert [[tuple(r) for r in one] for one in rows] == [[(i, f"n{i}")] for i in range(50)]
        with pytest.raises(sa_exc.IntegrityError):  # the 3rd repeats a name: all roll back
            direct.run_all(engine, statement, [{"i": 100, "n": "x"}, {"i": 101, "n": "y"},
                                               {"i": 102, "n": "n7"}])
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(table)).scalar() == 50
        # A statement that returns no rows answers an empty list per execution.
        rename = update(table).where(table.c.id == bindparam("i")).values(name=bindparam("n"))
        assert direct.run_all(engine, rename, [{"i": 1, "n": "one"}, {"i": 2, "n": "two"}]
                              ) == [[], []]
        assert direct.run(engine, rename, {"i": 3, "n": "three"}) == []
        with engine.connect() as conn:
            assert conn.execute(select(table.c.name).where(table.c.id < 4).order_by(table.c.id)
                                ).scalars().all() == ["n0", "one", "two", "three"]
    finally:
        engine.dispose()


def test_pipelined_executions_in_autocommit_still_land_together(postgres: Any) -> None:
    engine = make_engine(postgres.create_database())
    try:
        table = _table(engine)
        statement = insert(table).values(id=bindparam("i"), name=bindparam("n")).returning(
            table.c.id)
        with pytest.raises(sa_exc.IntegrityError):
            direct.run_all(engine, statement, [{"i": 1, "n": "a"}, {"i": 2, "n": "a"}],
                           transaction=False)
        with engine.connect() as conn:  # one implicit transaction on the server: none landed
            assert conn.execute(select(table.c.name)).scalars().all() == []
        direct.run_all(engine, statement, [{"i": 1, "n": "a"}], transaction=False)
        # The pooled connection went back usable, in its default (transactional) mode.
        assert direct.run_all(engine, select(table.c.name).where(table.c.id == bindparam("i")),
                              [{"i": 1}, {"i": 2}], transaction=False) == [[("a",)], []]
    finally:
        engine.dispose()
