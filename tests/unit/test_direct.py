"""Statements run straight on the driver: the same exceptions a Session raises, each
committed on its own, and rolled back when it answers another number of rows than
expected."""

from __future__ import annotations

import json
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
    table = Table("direct", MetaData(), Column("id", Integer, primary_key=True),
                  Column("name", String, unique=True))
    table.create(engine)
    return table


def test_a_statement_commits_on_its_own_and_answers_its_rows(postgres: Any) -> None:
    engine = make_engine(postgres.create_database())
    try:
        table = _table(engine)
        statement = insert(table).from_select(
            ["id", "name"], select(func.generate_series(1, bindparam("n")).label("id"),
                                   literal("x").concat(func.generate_series(1, bindparam("n")))
                                   )).returning(table.c.id)
        assert sorted(r.id for r in direct.run(engine, statement, {"n": 3})) == [1, 2, 3]
        rename = update(table).where(table.c.id == bindparam("i")).values(name=bindparam("m"))
        assert direct.run(engine, rename, {"i": 3, "m": "three"}) == []  # no rows: empty
        with pytest.raises(sa_exc.IntegrityError):  # a repeated name: nothing lands
            direct.run(engine, rename, {"i": 2, "m": "three"})
        with engine.connect() as conn:
            assert conn.execute(select(table.c.name).order_by(table.c.id)).scalars().all() == [
                "x1", "x2", "three"]
    finally:
        engine.dispose()


def test_a_statement_that_answers_other_than_expected_is_rolled_back(postgres: Any) -> None:
    engine = make_engine(postgres.create_database())
    try:
        table = _table(engine)
        statement = insert(table).values(id=bindparam("i"), name=bindparam("n")).returning(
            table.c.id)
        with pytest.raises(RuntimeError, match="expected 2 rows, the statement answered 1"):
            direct.run(engine, statement, {"i": 1, "n": "a"}, expect=2)
        assert [tuple(r) for r in direct.run(engine, statement, {"i": 2, "n": "b"},
                                             expect=1)] == [(2,)]
        with engine.connect() as conn:  # the first rolled back, the second committed
            assert conn.execute(select(table.c.name)).scalars().all() == ["b"]
        # The pooled connection went back usable, in its default (transactional) mode.
        assert [tuple(r) for r in direct.run(engine, select(table.c.name), {})] == [("b",)]
    finally:
        engine.dispose()


@pytest.mark.parametrize("value", [
    [{"n": 0, "key": "k", "tags": ["a", "é"], "size": 1024, "importance": 0.25,
      "title": None, "searchable": True}],
    {"text": "line\nbreak \"quoted\" \\ \u2028 😀"},
    [1.5e300, -0.0, 2**63 - 1, -(2**63)],
])
def test_json_text_is_the_json_the_standard_library_reads_back(value: Any) -> None:
    assert json.loads(direct.json_text(value)) == value


@pytest.mark.parametrize("value", [["lone \ud800 surrogate"], [2**64], {"n": -(2**70)}])
def test_json_text_hands_what_orjson_refuses_to_the_standard_library(value: Any) -> None:
    assert direct.json_text(value) == json.dumps(value)


def test_a_statements_values_are_what_construct_params_gives() -> None:
    from sqlalchemy import text

    from control_plane.memories import hotpath, hotpath_commit

    engine = make_engine("postgresql://nobody@127.0.0.1:1/none")  # compiles, never connects
    try:
        unnamed = select(literal(1)).where(bindparam("a", value=5) < bindparam("b"),
                                           literal("x") != bindparam("c", value=None))
        typed = text("SELECT :a, :b").bindparams(bindparam("a", value=3),
                                                 bindparam("b", required=True))
        cases = [(unnamed, {"b": 2}), (unnamed, {"a": 1, "b": 2, "c": "y", "param_1": 9}),
                 (typed, {"b": 4}), (hotpath.LOOKUP_READ, {"v_tenant": "t", "v_scope": "user",
                                                           "v_scope_ref": "u", "v_key": "k"}),
                 (hotpath_commit.WRITE_POSTGRES, {name: name for name in (
                     hotpath_commit.WRITE_POSTGRES.compile(dialect=engine.dialect).params)})]
        for statement, params in cases:
            compiled: Any = direct._compile(engine, statement)
            assert direct._by_name(compiled) is not None
            assert direct._named_values(compiled, params) == compiled.construct_params(params)
        compiled = direct._compile(engine, typed)
        with pytest.raises(sa_exc.InvalidRequestError, match="'b'"):
            direct._named_values(compiled, {"a": 1})
        with pytest.raises(sa_exc.InvalidRequestError, match="'b'"):
            compiled.construct_params({"a": 1})
    finally:
        engine.dispose()


def test_statements_sharing_a_connection_each_answer_their_own_columns(postgres: Any) -> None:
    """One pooled connection (a pool of one) keeps its cursor from statement to statement:
    each statement's rows still carry its own column names and values, also after a
    statement that failed and after one whose large result was not kept."""
    engine = make_engine(postgres.create_database(), pool_size=1)
    try:
        table = _table(engine)
        add = insert(table).values(id=bindparam("i"), name=bindparam("n")).returning(
            table.c.id, table.c.name)
        names = select(table.c.name.label("label"), (table.c.id * 10).label("tens")).order_by(
            table.c.id)
        assert [(r.id, r.name) for r in direct.run(engine, add, {"i": 1, "n": "a"})] == [
            (1, "a")]
        assert [(r.label, r.tens) for r in direct.run(engine, names, {})] == [("a", 10)]
        with pytest.raises(sa_exc.IntegrityError):
            direct.run(engine, add, {"i": 1, "n": "again"})
        assert [(r.id, r.name) for r in direct.run(engine, add, {"i": 2, "n": "b"})] == [
            (2, "b")]
        many = select(func.generate_series(1, bindparam("n")).label("n"))
        assert [r.n for r in direct.run(engine, many, {"n": direct._ROWS_KEPT + 1})] == list(
            range(1, direct._ROWS_KEPT + 2))
        assert [(r.label, r.tens) for r in direct.run(engine, names, {})] == [
            ("a", 10), ("b", 20)]
        assert [r.n for r in direct.run(engine, many, {"n": 2})] == [1, 2]
        assert direct.run(engine, many, {"n": 0}) == []
    finally:
        engine.dispose()


def test_a_connection_keeps_its_cursor_only_while_its_result_is_small(postgres: Any) -> None:
    engine = make_engine(postgres.create_database(), pool_size=1)
    try:
        many = select(func.generate_series(1, bindparam("n")).label("n"))
        direct.run(engine, many, {"n": direct._ROWS_KEPT})
        raw = engine.raw_connection()
        kept = raw.info[direct._CURSOR]
        raw.close()
        direct.run(engine, many, {"n": 3})
        raw = engine.raw_connection()
        assert raw.info[direct._CURSOR] is kept  # the same cursor ran the next statement
        raw.close()
        direct.run(engine, many, {"n": direct._ROWS_KEPT + 1})
        raw = engine.raw_connection()
        assert direct._CURSOR not in raw.info and kept.closed  # its large result went with it
        raw.close()
    finally:
        engine.dispose()
