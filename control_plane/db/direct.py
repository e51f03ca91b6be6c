"""One self-contained statement straight on the driver connection, for the hot path.

A memory write or read runs two statements; through a Session each cost one to two
milliseconds of SQLAlchemy bookkeeping on top of a sub-millisecond round trip. Here the
statement (built and compiled once with SQLAlchemy) runs on a pooled psycopg connection in
autocommit mode: one round trip, committed on its own, rows back as named tuples. Errors are
the same SQLAlchemy exceptions a Session raises, and a connection lost on the way is
dropped from the pool, so callers handle failures exactly as before.

PostgreSQL only; SQLite runs in-process, where the Session's overhead is all there is and
callers keep using it.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Compiled
from sqlalchemy.sql.elements import ClauseElement

_compiled: dict[tuple[int, int], Compiled] = {}
_lock = threading.Lock()


def _compile(engine: Engine, statement: ClauseElement) -> Compiled:
    key = (id(engine.dialect), id(statement))
    found = _compiled.get(key)
    if found is None:
        with _lock:
            found = _compiled[key] = statement.compile(dialect=engine.dialect)
    return found


def run(engine: Engine, statement: ClauseElement, params: dict[str, Any]) -> list[Any]:
    """Execute ``statement`` with ``params`` in a transaction of its own; its rows."""
    compiled = _compile(engine, statement)
    values = compiled.construct_params(params)
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        raw = engine.raw_connection()  # unlike connect(), leaves driver errors unwrapped
    except dbapi_error as exc:
        raise sa_exc.DBAPIError.instance(None, None, exc, dbapi_error,
                                         dialect=engine.dialect) from exc
    from psycopg.rows import namedtuple_row  # only PostgreSQL servers get here: [postgres]

    driver = raw.driver_connection
    assert driver is not None
    try:
        driver.autocommit = True
        try:
            with driver.cursor(row_factory=namedtuple_row) as cursor:
                cursor.execute(compiled.string, values)
                return cursor.fetchall() if cursor.description is not None else []
        finally:
            if not driver.closed:
                driver.autocommit = False
    except dbapi_error as exc:
        lost = engine.dialect.is_disconnect(exc, driver, None)
        if lost:
            raw.invalidate()
        raise sa_exc.DBAPIError.instance(compiled.string, values, exc, dbapi_error,
                                         connection_invalidated=lost,
                                         dialect=engine.dialect) from exc
    finally:
        raw.close()


def run_all(engine: Engine, statement: ClauseElement,
            params: list[dict[str, Any]]) -> list[list[Any]]:
    """Execute ``statement`` once per parameter set, all in ONE transaction, committed at the
    end (a batch's pointer rows); the rows of each execution. Any failure rolls all back."""
    compiled = _compile(engine, statement)
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        raw = engine.raw_connection()
    except dbapi_error as exc:
        raise sa_exc.DBAPIError.instance(None, None, exc, dbapi_error,
                                         dialect=engine.dialect) from exc
    from psycopg.rows import namedtuple_row

    driver = raw.driver_connection
    assert driver is not None
    values: Any = None
    try:
        driver.autocommit = False
        results = []
        try:
            with driver.cursor(row_factory=namedtuple_row) as cursor:
                for one in params:
                    values = compiled.construct_params(one)
                    cursor.execute(compiled.string, values)
                    results.append(cursor.fetchall() if cursor.description is not None else [])
            driver.commit()
        except BaseException:
            if not driver.closed:
                driver.rollback()
            raise
        return results
    except dbapi_error as exc:
        lost = engine.dialect.is_disconnect(exc, driver, None)
        if lost:
            raw.invalidate()
        raise sa_exc.DBAPIError.instance(compiled.string, values, exc, dbapi_error,
                                         connection_invalidated=lost,
                                         dialect=engine.dialect) from exc
    finally:
        raw.close()
