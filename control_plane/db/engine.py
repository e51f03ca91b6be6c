"""Engines and sessions for SQLite (the embedded default) and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker


def make_engine(url: str, *, pool_size: int = 10, sqlite_synchronous: str = "FULL") -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, sqlite_synchronous)
    if parsed.drivername == "postgresql":
        url = str(parsed.set(drivername="postgresql+psycopg"))
    # Plans stay PostgreSQL's choice: forcing generic plans saved ~0.7 ms per write but made
    # list-by-scope 5x slower at a million pointers (measured with bench/scale.py).
    return create_engine(
        url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=False,
        pool_recycle=1800,
    )


def _sqlite_engine(url: str, synchronous: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                           pool_size=8, max_overflow=8)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # SQLAlchemy, not the driver, decides when transactions begin (see _on_begin).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A write transaction takes the write lock up front: a deferred one that reads and
        # then writes can fail with "database is locked" instead of waiting its turn.
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False, autoflush=False)


def begin_write(session: Session) -> None:
    """Open the session's next transaction as a write transaction.

    Call with no transaction open. On PostgreSQL this is a plain BEGIN; on SQLite it is
    BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout rather than fail.
    """
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
