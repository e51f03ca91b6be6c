"""PostgreSQL: a transaction that wrote nothing ends with COMMIT, so the connection keeps the
statements psycopg prepared on it (control_plane/db/prepared.py); one that wrote, locked a
row or failed is rolled back as before, and what it wrote is gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy import exc as sa_exc

from control_plane.db.engine import make_engine, make_session_factory

# A statement psycopg prepares at its fifth execution on a connection.
_HOT = text("SELECT count(*) FROM kept WHERE n > :n")


@pytest.fixture
def engine(postgres: Any) -> Iterator[Engine]:
    engine = make_engine(postgres.create_database(), pool_size=1)  # one connection: the same
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE kept (n integer PRIMARY KEY)"))
        conn.execute(text("INSERT INTO kept VALUES (1), (2), (3)"))
    try:
        yield engine
    finally:
        engine.dispose()


def _prepared(engine: Engine) -> list[tuple[int, int]]:
    """The hot statement as the server holds it on the pool's connection: (generic plans,
    custom plans) of each time it is prepared."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE 'SELECT count(*) FROM kept%' ORDER BY prepare_time")).all()
        conn.commit()
    return [(int(g), int(c)) for g, c in rows]


def _warm(engine: Engine) -> None:
    for n in range(12):  # prepared at the fifth, then run prepared
        with engine.connect() as conn:
            assert conn.execute(_HOT, {"n": n % 3}).scalar() == 3 - n % 3
            conn.commit()


def test_a_session_that_only_read_leaves_the_statements_prepared(engine: Engine) -> None:
    _warm(engine)
    before = _prepared(engine)
    assert len(before) == 1

    sessions = make_session_factory(engine)
    with sessions() as session:  # a lookup, then closed without a commit: rolled back
        assert session.execute(text("SELECT n FROM kept WHERE n = 2")).scalar() == 2
    with sessions() as session:
        session.execute(text("SELECT 1"))
        session.rollback()  # an explicit rollback of a read-only transaction

    # Still the one prepared statement, run again without being prepared anew.
    with engine.connect() as conn:
        assert conn.execute(_HOT, {"n": 0}).scalar() == 3
        conn.commit()
    after = _prepared(engine)
    assert len(after) == 1
    assert sum(after[0]) == sum(before[0]) + 1


def test_a_rollback_after_a_write_undoes_it(engine: Engine) -> None:
    _warm(engine)
    sessions = make_session_factory(engine)
    with sessions() as session:
        session.execute(text("INSERT INTO kept VALUES (4)"))
        session.execute(text("UPDATE kept SET n = 10 WHERE n = 1"))
        session.rollback()
    with sessions() as session:  # closed without a commit: rolled back as well
        session.execute(text("DELETE FROM kept WHERE n = 2"))

    with engine.connect() as conn:
        assert conn.execute(text("SELECT n FROM kept ORDER BY n")).scalars().all() == [1, 2, 3]
        conn.commit()
    # psycopg forgot what it had prepared: the write's rollback was a ROLLBACK
    assert _prepared(engine) == []


def test_a_locking_read_is_rolled_back_and_its_lock_let_go(engine: Engine) -> None:
    sessions = make_session_factory(engine)
    with sessions() as session:
        assert session.execute(text("SELECT n FROM kept WHERE n = 3 FOR UPDATE")).scalar() == 3
        session.rollback()
    other = make_engine(str(engine.url.render_as_string(hide_password=False)), pool_size=1)
    try:
        with other.connect() as conn:  # the row is free: NOWAIT would fail on a held lock
            conn.execute(text("SET lock_timeout = '2s'"))
            assert conn.execute(text("SELECT n FROM kept WHERE n = 3 FOR UPDATE NOWAIT")
                                ).scalar() == 3
            conn.rollback()
    finally:
        other.dispose()


def test_a_failed_transaction_is_rolled_back_and_the_connection_serves_again(
        engine: Engine) -> None:
    _warm(engine)
    sessions = make_session_factory(engine)
    with sessions() as session:
        with pytest.raises(sa_exc.ProgrammingError):
            session.execute(text("SELECT no_such_column FROM kept"))
        session.rollback()
    with sessions() as session:
        assert session.execute(text("SELECT count(*) FROM kept")).scalar() == 3
