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


def run(engine: Engine, statement: ClauseElement, params: dict[str, Any], *,
        expect: int | None = None) -> list[Any]:
    """Execute ``statement`` with ``params`` in a transaction of its own; its rows. With
    ``expect``, a statement that answers another number of rows is rolled back (RuntimeError)
    instead of committed."""
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
        driver.autocommit = expect is None
        try:
            with driver.cursor(row_factory=namedtuple_row) as cursor:
                cursor.execute(compiled.string, values)
                rows = cursor.fetchall() if _has_rows(cursor) else []
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
        lost = engine.dialect.is_disconnect(exc, driver, None)
        if lost:
            raw.invalidate()
        raise sa_exc.DBAPIError.instance(compiled.string, values, exc, dbapi_error,
                                         connection_invalidated=lost,
                                         dialect=engine.dialect) from exc
    finally:
        raw.close()


def _has_rows(cursor: Any) -> bool:
    """Whether the cursor's current result has rows to fetch: what ``description`` checks,
    without building a column object per column on every call (a batch's hundred results)."""
    from psycopg.pq import ExecStatus

    res = cursor.pgresult
    return res is not None and bool(res.nfields or res.status == ExecStatus.TUPLES_OK)
