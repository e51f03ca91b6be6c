"""A memory write's step 3 on SQLite runs its write transaction straight on the driver
(``db.direct.sqlite_write``): it takes the writers' turn before ``BEGIN IMMEDIATE`` and gives
it back however the transaction ends, commits what it wrote, keeps nothing of one rolled back
or failed, and raises driver errors as SQLAlchemy's (the write path tells a lost commit from a
refused statement by them)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, Integer, column, insert, table, text
from sqlalchemy import exc as sa_exc

from control_plane.db import direct
from control_plane.db.engine import SqliteWriters, make_engine, sqlite_writers

T = table("t", column("x", Integer))
INSERT = insert(T).values(x=text(":x"))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'writes.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER UNIQUE)")
        conn.exec_driver_sql("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        conn.exec_driver_sql("CREATE TABLE child (p INTEGER REFERENCES parent (id) "
                             "DEFERRABLE INITIALLY DEFERRED)")
    yield engine
    engine.dispose()


def _writers(engine: Engine) -> SqliteWriters:
    writers = sqlite_writers(engine)
    assert writers is not None
    return writers


def _rows(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return [x for (x,) in conn.exec_driver_sql("SELECT x FROM t ORDER BY x")]


def _turn_free(engine: Engine) -> bool:
    writers = _writers(engine)
    return not writers.lock.locked() and writers.holder is None


def test_it_commits_what_it_wrote_holding_the_turn_meanwhile(engine: Engine) -> None:
    with direct.sqlite_write(engine) as transaction:
        assert transaction.execute(INSERT, {"x": 1}) == []
        assert _writers(engine).lock.locked()
        assert _writers(engine).holder is transaction.driver
        assert transaction.driver.in_transaction
    assert _turn_free(engine)
    assert _rows(engine) == [1]


def test_a_rollback_asked_for_keeps_nothing(engine: Engine) -> None:
    with direct.sqlite_write(engine) as transaction:
        transaction.execute(INSERT, {"x": 1})
        transaction.rollback()
    assert _turn_free(engine)
    assert _rows(engine) == []


def test_an_error_inside_keeps_nothing_and_is_raised_as_it_was(engine: Engine) -> None:
    with pytest.raises(KeyError, match="boom"):
        with direct.sqlite_write(engine) as transaction:
            transaction.execute(INSERT, {"x": 1})
            raise KeyError("boom")
    assert _turn_free(engine)
    assert _rows(engine) == []


def test_a_refused_statement_is_sqlalchemys_integrity_error(engine: Engine) -> None:
    with direct.sqlite_write(engine) as transaction:
        transaction.execute(INSERT, {"x": 1})
    with pytest.raises(sa_exc.IntegrityError) as raised:
        with direct.sqlite_write(engine) as transaction:
            transaction.execute(INSERT, {"x": 2})
            transaction.execute(INSERT, {"x": 1})
    assert isinstance(raised.value.orig, sqlite3.IntegrityError)
    assert _turn_free(engine)
    assert _rows(engine) == [1]  # the 2 went with the transaction


def test_a_failed_commit_is_raised_as_sqlalchemys_and_keeps_nothing(engine: Engine) -> None:
    orphan = text("INSERT INTO child (p) VALUES (:p)")
    with pytest.raises(sa_exc.IntegrityError, match="FOREIGN KEY") as raised:
        with direct.sqlite_write(engine) as transaction:
            transaction.execute(INSERT, {"x": 5})
            transaction.execute(orphan, {"p": 42})  # deferred: refused only by the COMMIT
    assert raised.value.statement == "COMMIT"
    assert _turn_free(engine)
    assert _rows(engine) == []
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM child").scalar_one() == 0


def test_a_writer_waits_for_the_turn_another_transaction_holds(engine: Engine) -> None:
    held, done = threading.Event(), threading.Event()
    go = threading.Event()

    def holder() -> None:
        with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn:
            with conn.begin():
                conn.exec_driver_sql("INSERT INTO t VALUES (1)")
                held.set()
                go.wait(30)

    def writer() -> None:
        with direct.sqlite_write(engine) as transaction:
            transaction.execute(INSERT, {"x": 2})
        done.set()

    first = threading.Thread(target=holder)
    first.start()
    assert held.wait(30)
    second = threading.Thread(target=writer)
    second.start()
    assert not done.wait(0.3)  # queued on the turn, not failed by SQLite's busy timeout
    go.set()
    first.join(30)
    second.join(30)
    assert done.is_set()
    assert _turn_free(engine)
    assert _rows(engine) == [1, 2]
