"""SQLite write transactions take turns on the engine's queue (``db.engine.SqliteWriters``):
each holds the turn from BEGIN IMMEDIATE to its commit or rollback, whatever ends it, and
nothing else takes or keeps it."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from control_plane.db.engine import (
    AUTOCOMMIT,
    SqliteWriters,
    begin_write,
    make_engine,
    sqlite_writers,
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'writers.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    yield engine
    engine.dispose()


def _writers(engine: Engine) -> SqliteWriters:
    writers = sqlite_writers(engine)
    assert writers is not None
    return writers


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM t")).scalar_one())


def test_a_write_transaction_holds_the_turn_until_it_commits(engine: Engine) -> None:
    writers = _writers(engine)
    with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn:
        with conn.begin():
            conn.execute(text("INSERT INTO t VALUES (1)"))
            assert writers.lock.locked()
            assert writers.holder is conn.connection.dbapi_connection
        assert not writers.lock.locked()
        assert writers.holder is None
    assert _count(engine) == 1


def test_a_rollback_or_an_error_ends_the_turn(engine: Engine) -> None:
    writers = _writers(engine)
    with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn:
        transaction = conn.begin()
        conn.execute(text("INSERT INTO t VALUES (1)"))
        transaction.rollback()
        assert not writers.lock.locked()
        with pytest.raises(ZeroDivisionError), conn.begin():
            conn.execute(text("INSERT INTO t VALUES (2)"))
            assert writers.lock.locked()
            _ = 1 / 0
        assert not writers.lock.locked()
    assert _count(engine) == 0


def test_a_sessions_write_transaction_takes_the_turn_and_reads_do_not(engine: Engine) -> None:
    writers = _writers(engine)
    with Session(engine) as session:
        session.execute(text("SELECT count(*) FROM t"))  # a deferred, read transaction
        assert not writers.lock.locked()
        begin_write(session)  # commits the read, opens BEGIN IMMEDIATE
        session.execute(text("INSERT INTO t VALUES (1)"))
        assert writers.lock.locked()
        session.commit()
        assert not writers.lock.locked()
    with engine.connect().execution_options(sqlite_begin=AUTOCOMMIT) as conn:
        conn.execute(text("INSERT INTO t VALUES (2)"))  # a lone statement, its own transaction
        assert not writers.lock.locked()
    assert _count(engine) == 2


def _impatient(engine: Engine) -> Connection:
    """A connection whose busy timeout is 50 ms instead of 30 s."""
    conn = engine.connect().execution_options(sqlite_begin=AUTOCOMMIT)
    conn.exec_driver_sql("PRAGMA busy_timeout=50")
    conn.commit()
    return conn.execution_options(sqlite_begin="IMMEDIATE")


def test_a_begin_that_fails_gives_the_turn_back(engine: Engine, tmp_path: Path) -> None:
    writers = _writers(engine)
    other = sqlite3.connect(tmp_path / "writers.db", isolation_level=None)  # another process
    other.execute("BEGIN IMMEDIATE")
    try:
        conn = _impatient(engine)
        with pytest.raises(sa_exc.OperationalError, match="database is locked"):
            conn.begin()
        assert not writers.lock.locked()
        conn.invalidate()
        conn.close()
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_second_write_in_the_same_thread_leaves_the_first_its_turn(engine: Engine) -> None:
    writers = _writers(engine)
    with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as first:
        with first.begin():
            first.execute(text("INSERT INTO t VALUES (1)"))
            second = _impatient(engine)  # does not wait on its own thread's turn
            with pytest.raises(sa_exc.OperationalError, match="database is locked"):
                second.begin()
            second.invalidate()
            second.close()
            assert writers.holder is first.connection.dbapi_connection
        assert not writers.lock.locked()
    assert _count(engine) == 1


def test_an_invalidated_connection_ends_its_turn(engine: Engine) -> None:
    writers = _writers(engine)
    conn = engine.connect().execution_options(sqlite_begin="IMMEDIATE")
    conn.begin()
    conn.execute(text("INSERT INTO t VALUES (1)"))
    assert writers.lock.locked()
    conn.invalidate()  # the driver's connection is closed: its transaction is gone
    assert not writers.lock.locked()
    conn.close()
    assert _count(engine) == 0


def test_concurrent_writers_each_write_once_and_leave_the_queue_free(engine: Engine) -> None:
    writers, errors = _writers(engine), []

    def write(thread: int) -> None:
        try:
            for i in range(25):
                with Session(engine) as session:
                    begin_write(session)
                    session.execute(text("INSERT INTO t VALUES (:x)"), {"x": thread * 100 + i})
                    session.commit()
        except Exception as exc:  # reported below with the thread's number
            errors.append((thread, exc))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _count(engine) == 200
    assert not writers.lock.locked()


def test_postgresql_engines_have_no_queue() -> None:
    engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert sqlite_writers(engine) is None
