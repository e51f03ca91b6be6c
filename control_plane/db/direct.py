"""One self-contained statement straight on the driver connection, for the hot path.

A memory write or read runs two statements; through a Session each cost one to two
milliseconds of SQLAlchemy bookkeeping on top of a sub-millisecond round trip. Here the
statement (built and compiled once with SQLAlchemy) runs on a pooled psycopg connection in
autocommit mode: one round trip, committed on its own, rows back as named tuples. Errors are
the same SQLAlchemy exceptions a Session raises, and a connection lost on the way is
dropped from the pool, so callers handle failures exactly as before.

``run`` is PostgreSQL's. On SQLite, ``run_sqlite`` runs a lone read-only statement on a
pooled connection and ``execute_sqlite`` a statement inside a transaction a Core connection
holds open (a write's): through Core a lookup cost ~250 us of CPU, nearly all of it
SQLAlchemy's (the statement's cache key walked on every call, the result's processors set up
per result), for ~15 us of SQLite's own work. Here the parameters go through the compiled
statement's own bind processors and each row's values through its columns' result
processors, both taken once per statement, so what is stored and read back is exactly what
SQLAlchemy would store and give. Statements are module constants (cached by identity).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from sqlalchemy import (
    Connection,
    Engine,
    String,
    Uuid,
    any_,
    bindparam,
    cast,
    func,
    select,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Compiled, Dialect
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

_compiled: dict[tuple[int, int], Compiled] = {}


def json_text(value: Any) -> str:
    """``value`` as JSON text for a statement's parameter (a batch's rows, read by the
    database's JSON functions): orjson, a twentieth of ``json.dumps``'s time for a hundred
    rows. What orjson refuses (a lone surrogate, an integer past 64 bits) goes through
    ``json.dumps``, so the database sees what it saw before and refuses what it refused."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)

_lock = threading.Lock()


def _compile(engine: Engine, statement: ClauseElement) -> Compiled:
    key = (id(engine.dialect), id(statement))
    found = _compiled.get(key)
    if found is None:
        with _lock:
            found = _compiled[key] = statement.compile(dialect=engine.dialect)
    return found


def id_list(ids: Sequence[uuid.UUID], dialect: Dialect) -> str:
    """One parameter for any number of ids, so a statement's SQL never changes: a JSON array
    of the hex ids SQLite stores (read by ``json_each``), the text of a uuid[] on PostgreSQL
    (cast in SQL; the driver passes it on without adapting each id). ``in_id_list`` is the
    statement's side."""
    if dialect.name == "sqlite":
        return "[" + ",".join(f'"{pid.hex}"' for pid in ids) + "]"
    return "{" + ",".join(pid.hex for pid in ids) + "}"


def in_id_list(column: Any, dialect_name: str) -> ColumnElement[bool]:
    """``column`` is one of the ids in the parameter ``ids`` (an ``id_list``)."""
    listed = bindparam("ids", None, type_=String)
    if dialect_name == "sqlite":
        return column.in_(select(func.json_each(listed).table_valued("value").c.value))
    return column == any_(cast(listed, ARRAY(Uuid())))


def pooled_raw(engine: Engine) -> Any:
    """A pooled connection of ``engine`` (close it to give it back). Unlike ``connect()``,
    ``raw_connection()`` leaves a driver error unwrapped: it is raised as SQLAlchemy's, as a
    Session would, so callers tell a lost database from a refused statement the usual way."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        return engine.raw_connection()
    except dbapi_error as exc:
        raise sa_exc.DBAPIError.instance(None, None, exc, dbapi_error,
                                         dialect=engine.dialect) from exc


def run(engine: Engine, statement: ClauseElement, params: dict[str, Any], *,
        expect: int | None = None) -> list[Any]:
    """Execute ``statement`` with ``params`` in a transaction of its own; its rows. With
    ``expect``, a statement that answers another number of rows is rolled back (RuntimeError)
    instead of committed."""
    compiled = _compile(engine, statement)
    values = _named_values(compiled, params)
    dbapi_error = engine.dialect.loaded_dbapi.Error
    raw = pooled_raw(engine)
    driver = raw.driver_connection
    assert driver is not None
    try:
        driver.autocommit = expect is None
        try:
            cursor = _kept_cursor(raw, driver)
            cursor.execute(compiled.string, values)
            rows = _named_rows(compiled, cursor)
            if len(rows) > _ROWS_KEPT:  # not kept holding a large result until its next use
                raw.info.pop(_CURSOR, None)
                cursor.close()
            if expect is not None:
                if len(rows) != expect:
                    raise RuntimeError(f"expected {expect} rows, the statement answered "
                                       f"{len(rows)}; rolled back")
                driver.commit()
            return rows
        finally:
            if not driver.closed:
                if expect is not None and driver.info.transaction_status:
                    driver.rollback()  # anything not committed above
                driver.autocommit = False
    except dbapi_error as exc:
        raw.info.pop(_CURSOR, None)
        lost = engine.dialect.is_disconnect(exc, driver, None)
        if lost:
            raw.invalidate()
        raise sa_exc.DBAPIError.instance(compiled.string, values, exc, dbapi_error,
                                         connection_invalidated=lost,
                                         dialect=engine.dialect) from exc
    finally:
        raw.close()


# Each pooled connection keeps one cursor for ``run`` (in the pool's record of the connection,
# emptied when the connection is replaced): a new cursor per statement cost ~10 us of CPU,
# its adapters and loaders set up again. A cursor keeps its last result until its next
# statement, so one that fetched more than _ROWS_KEPT rows is closed instead of kept.
_CURSOR = "memplane.direct.cursor"
_ROWS_KEPT = 64
# Each statement's row type (a named tuple of its result's column names), made from its
# first result: psycopg's ``namedtuple_row`` works the names out again for every result.
_row_types: dict[int, Callable[[Any], Any]] = {}


def _kept_cursor(raw: Any, driver: Any) -> Any:
    cursor = raw.info.get(_CURSOR)
    if cursor is None or cursor.closed or cursor.connection is not driver:
        from psycopg.rows import tuple_row  # only PostgreSQL servers get here: [postgres]

        cursor = raw.info[_CURSOR] = driver.cursor(row_factory=tuple_row)
    return cursor


def _named_rows(compiled: Compiled, cursor: Any) -> list[Any]:
    """The rows of ``cursor``'s result (fetched as plain tuples) as named tuples; [] for a
    statement that returns no rows."""
    if not _has_rows(cursor):
        return []
    make = _row_types.get(id(compiled))  # compiled statements are kept for good
    if make is None:
        from psycopg.rows import namedtuple_row  # only PostgreSQL servers get here

        make = _row_types[id(compiled)] = namedtuple_row(cursor)
    return [make(row) for row in cursor.fetchall()]


def _has_rows(cursor: Any) -> bool:
    """Whether the cursor's current result has rows to fetch: what ``description`` checks,
    without building a column object per column on every call (a batch's hundred results)."""
    res = cursor.pgresult
    return res is not None and bool(res.nfields or res.status == _TUPLES_OK)


_TUPLES_OK = 2  # psycopg.pq.ExecStatus.TUPLES_OK: libpq's PGRES_TUPLES_OK, fixed by its ABI


class _SqliteStatement:
    """A statement compiled once for SQLite, with what a call needs: the SQL, each
    positional parameter's name and bind processor, each result column's processor and a
    row type named by the result's keys."""

    def __init__(self, engine: Engine, statement: ClauseElement) -> None:
        compiled: Any = _compile(engine, statement)
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise ValueError("run_sqlite takes statements without expanding parameters")
        self.sql: str = compiled.string
        self.compiled = compiled
        binds = compiled._bind_processors
        self.binds: list[tuple[str, Callable[[Any], Any] | None]] = [
            (name, binds.get(name)) for name in compiled.positiontup]
        self.plan = _plan(compiled, self.binds)
        columns = compiled._result_columns  # (key, name, objects, type) per result column
        self.results: list[Callable[[Any], Any] | None] = [
            column[3]._cached_result_processor(engine.dialect, None) for column in columns]
        self.row: Any = namedtuple("Row", [column[0] for column in columns])  # type: ignore[misc]

    def parameters(self, params: dict[str, Any]) -> list[Any]:
        if self.plan is None:
            values = self.compiled.construct_params(params)
            return [values[name] if bind is None else bind(values[name])
                    for name, bind in self.binds]
        out: list[Any] = []
        for name, key, fixed, bind in self.plan:
            value = params[key] if key in params else _value(params, name, key, fixed)
            out.append(value if bind is None else bind(value))
        return out

    def rows(self, raw: list[tuple[Any, ...]]) -> list[Any]:
        results, make = self.results, self.row._make
        return [make([value if result is None else result(value)
                      for result, value in zip(results, row, strict=True)]) for row in raw]


_REQUIRED: Any = object()
_UNPLANNED: Any = object()
_named: dict[int, list[tuple[str, str, Any]] | None] = {}


def _by_name(compiled: Any) -> list[tuple[str, str, Any]] | None:
    """What ``construct_params`` does for each of the statement's parameters, worked out
    once: its name in the SQL, its key (a caller's value comes under either, the key first),
    else the statement's own value (``_REQUIRED``: none). None where a call must go through
    ``construct_params`` (an escaped name, a value computed by a callable, one name standing
    for two parameters, values given to the statement with ``.params()``)."""
    found = _named.get(id(compiled), _UNPLANNED)  # compiled statements are kept for good
    if found is not _UNPLANNED:
        return found  # type: ignore[no-any-return]
    entries = [(name, bind.key, _REQUIRED if bind.required else bind.value)
               for bind, name in compiled.bind_names.items()]
    plannable = (len({name for name, _, _ in entries}) == len(entries)
                 and all(bind.callable is None for bind in compiled.bind_names)
                 and not compiled.escaped_bind_names
                 and not getattr(compiled, "_collected_params", None))
    plan = entries if plannable else None
    _named[id(compiled)] = plan
    return plan


def _value(params: dict[str, Any], name: str, key: str, fixed: Any) -> Any:
    if key in params:
        return params[key]
    if name in params:
        return params[name]
    if fixed is _REQUIRED:
        raise sa_exc.InvalidRequestError(f"A value is required for bind parameter {key!r}",
                                         code="cd3x")
    return fixed


def _named_values(compiled: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``compiled.construct_params(params)``, by the statement's plan where it has one."""
    plan = _by_name(compiled)
    if plan is None:
        return compiled.construct_params(params)  # type: ignore[no-any-return]
    return {name: _value(params, name, key, fixed) for name, key, fixed in plan}


def _plan(compiled: Any, binds: list[tuple[str, Callable[[Any], Any] | None]]
          ) -> list[tuple[str, str, Any, Callable[[Any], Any] | None]] | None:
    """``_by_name`` for each positional parameter, with its bind processor."""
    plan = _by_name(compiled)
    if plan is None:
        return None
    by_name = {name: (key, fixed) for name, key, fixed in plan}
    return [(name, *by_name[name], bind) for name, bind in binds]


_sqlite: dict[tuple[int, int], _SqliteStatement] = {}


def _prepared(engine: Engine, statement: ClauseElement) -> _SqliteStatement:
    key = (id(engine.dialect), id(statement))  # statements are module constants, as _compile's
    prepared = _sqlite.get(key)
    if prepared is None:  # built twice at worst by racing threads: the same either way
        prepared = _sqlite[key] = _SqliteStatement(engine, statement)
    return prepared


def execute_sqlite(conn: Connection, statement: ClauseElement,
                   params: dict[str, Any]) -> list[Any]:
    """``statement`` (a module constant) with ``params`` on ``conn``'s SQLite connection, in
    whatever transaction ``conn`` has open (its commit or rollback ends it); its rows, if
    it returns any, as ``run_sqlite`` gives them."""
    return _on_driver(conn.engine, conn.connection.driver_connection, statement, params)


def run_sqlite(engine: Engine, statement: ClauseElement, params: dict[str, Any]) -> list[Any]:
    """Execute the read-only ``statement`` with ``params`` on a pooled SQLite connection, on
    its own (SQLite runs a lone statement atomically: no BEGIN/COMMIT); its rows as named
    tuples holding the values SQLAlchemy would give. Driver errors are raised as
    SQLAlchemy's, as ``run`` does."""
    raw = engine.raw_connection()
    try:
        return _on_driver(engine, raw.driver_connection, statement, params)
    finally:
        raw.close()


def _on_driver(engine: Engine, driver: Any, statement: ClauseElement,
               params: dict[str, Any]) -> list[Any]:
    prepared = _prepared(engine, statement)
    values = prepared.parameters(params)
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        cursor = driver.execute(prepared.sql, values)
        fetched = cursor.fetchall() if cursor.description is not None else []
    except dbapi_error as exc:
        raise sa_exc.DBAPIError.instance(prepared.sql, values, exc, dbapi_error,
                                         dialect=engine.dialect) from exc
    return prepared.rows(fetched)


class SqliteWrite:
    """A write transaction (``BEGIN IMMEDIATE``) held straight on a pooled SQLite driver
    connection (``sqlite_write``): ``execute`` runs statements in it as ``execute_sqlite``
    does; ``rollback()`` asks for it to end rolled back instead of committed."""

    def __init__(self, engine: Engine, driver: Any) -> None:
        self.engine, self.driver = engine, driver
        self.rolled_back = False

    def execute(self, statement: ClauseElement, params: dict[str, Any]) -> list[Any]:
        return _on_driver(self.engine, self.driver, statement, params)

    def rollback(self) -> None:
        self.rolled_back = True


@contextmanager
def sqlite_write(engine: Engine) -> Iterator[SqliteWrite]:
    """A write transaction on the driver, committed when the block ends (rolled back on an
    error, or when ``rollback()`` was asked for): what ``engine.connect()`` with
    ``sqlite_begin="IMMEDIATE"`` and ``begin()`` do — the writers' turn taken first
    (``engine.sqlite_writers``), ``BEGIN IMMEDIATE``, ``COMMIT``, the turn given back —
    without SQLAlchemy's connection, transaction and event objects around them: about a
    third of the CPU of a short write transaction's own bookkeeping. Driver errors are
    raised as SQLAlchemy's, as ``run`` does (a failed ``COMMIT``: an OperationalError,
    its outcome unknown to the caller)."""
    from .engine import sqlite_writers

    raw = pooled_raw(engine)
    driver: Any = raw.driver_connection
    writers = sqlite_writers(engine)
    try:
        if writers is not None:
            writers.begin(driver)
        try:
            _driver_sql(engine, driver, "BEGIN IMMEDIATE")
            transaction = SqliteWrite(engine, driver)
            yield transaction
            _driver_sql(engine, driver, "ROLLBACK" if transaction.rolled_back else "COMMIT")
        finally:
            if driver.in_transaction:  # an error above: nothing of it is kept
                driver.rollback()
            if writers is not None:
                writers.end(driver)
    finally:
        raw.close()


def _driver_sql(engine: Engine, driver: Any, sql: str) -> None:
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        driver.execute(sql)
    except dbapi_error as exc:
        raise sa_exc.DBAPIError.instance(sql, None, exc, dbapi_error,
                                         dialect=engine.dialect) from exc
