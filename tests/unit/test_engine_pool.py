"""The connection pool hands out the connection returned last: after a burst, requests
that come one at a time keep reusing one warm connection (on PostgreSQL one server process,
its statements prepared) instead of each idle connection in turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control_plane.db.engine import make_engine


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_connection_returned_last_is_handed_out_next(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = (f"sqlite:///{tmp_path / 'pool.db'}" if backend == "sqlite"
           else request.getfixturevalue("postgres").create_database())
    engine = make_engine(url)
    try:
        burst = [engine.raw_connection() for _ in range(3)]
        drivers: list[Any] = [raw.driver_connection for raw in burst]
        for raw in burst:  # returned first to last
            raw.close()
        following = []
        for _ in range(4):
            raw = engine.raw_connection()
            following.append(raw.driver_connection)
            raw.close()
    finally:
        engine.dispose()

    assert len({id(d) for d in drivers}) == 3
    assert [drivers.index(d) for d in following] == [2, 2, 2, 2]


def _backend(engine: Any) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(url: str, pid: int) -> None:
    """What a proxy's idle timeout or a database restart does to a pooled connection."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                         autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


@pytest.mark.parametrize("pre_ping", [True, False])
def test_a_connection_closed_by_the_server_is_replaced_with_pre_ping(
        pre_ping: bool, postgres: Any) -> None:
    from sqlalchemy import exc as sa_exc

    url = postgres.create_database()
    engine = make_engine(url, pre_ping=pre_ping)
    try:
        first = _backend(engine)
        _terminate(url, first)
        if pre_ping:
            after = _backend(engine)  # the closed one is noticed and replaced
        else:
            with pytest.raises(sa_exc.OperationalError):  # the request that meets it fails
                _backend(engine)
            after = _backend(engine)  # and the pool has dropped it
    finally:
        engine.dispose()

    assert after != first


class _PoolClock:
    """The pool's clock (``sqlalchemy.pool.base`` reads ``time.time()``), moved on at will:
    a connection's age is made, not waited for."""

    def __init__(self) -> None:
        import time

        self._time = time.time
        self.ahead = 0.0

    def time(self) -> float:
        return self._time() + self.ahead


def test_a_connection_older_than_the_recycle_time_is_replaced(
        postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy.pool import base as pool_base

    clock = _PoolClock()
    monkeypatch.setattr(pool_base, "time", clock)
    engine = make_engine(postgres.create_database(), pool_recycle=60)
    try:
        first = _backend(engine)
        clock.ahead = 59.0  # younger than the recycle time: kept
        again = _backend(engine)
        clock.ahead = 61.0  # older: replaced at its next checkout
        later = _backend(engine)
    finally:
        engine.dispose()

    assert (again == first, later != first) == (True, True)


def test_the_servers_settings_reach_its_pool(postgres: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMPLANE_DB_POOL_PRE_PING and MEMPLANE_DB_POOL_RECYCLE_SECONDS, read from the
    environment as a server reads them."""
    from control_plane.runtime import Runtime
    from tests.support.service import make_settings

    url = postgres.create_database()
    monkeypatch.setenv("MEMPLANE_DB_POOL_PRE_PING", "true")
    monkeypatch.setenv("MEMPLANE_DB_POOL_RECYCLE_SECONDS", "600")
    settings = make_settings(url, tmp_path, run_background=False)
    runtime = Runtime(settings)
    try:
        first = _backend(runtime.engine)
        _terminate(url, first)
        after = _backend(runtime.engine)  # replaced, not failed: pre-ping is on
    finally:
        runtime.close()

    assert (settings.db_pool_pre_ping, settings.db_pool_recycle_seconds) == (True, 600)
    assert after != first
