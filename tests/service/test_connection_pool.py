"""A process keeps the connections its requests use at once: a server answering 16 clients
does not open and close database connections request after request (on PostgreSQL each one
a new server process, its statements prepared and planned again)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import event, text

from control_plane.db.engine import peak_extra
from control_plane.runtime import Runtime
from tests.support.service import own_runtime

AT_ONCE = 16


@pytest.fixture
def runtime(database: str, request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    yield from own_runtime(database, request, tmp_path_factory, "pool")


def _burst(runtime: Runtime, threads: int) -> None:
    """``threads`` sessions holding a connection at the same moment, each running a query."""
    together = threading.Barrier(threads)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            with runtime.sessions() as session:
                session.execute(text("SELECT 1"))
                together.wait(timeout=30)
                assert session.execute(text("SELECT 2")).scalar() == 2
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []


def test_sixteen_requests_at_once_reuse_the_connections_kept(runtime: Runtime) -> None:
    opened: list[int] = []
    event.listen(runtime.engine, "connect", lambda *_: opened.append(1))
    _burst(runtime, AT_ONCE)
    first = len(opened)
    assert first <= AT_ONCE
    for _ in range(3):
        _burst(runtime, AT_ONCE)
    assert len(opened) == first  # every later burst found its connections kept


def test_a_peak_above_the_pool_opens_connections_and_closes_them_once_returned(
        runtime: Runtime) -> None:
    kept = runtime.settings.db_pool_size
    _burst(runtime, kept + peak_extra(kept))  # the most a process holds at once
    assert runtime.engine.pool.checkedin() == kept  # type: ignore[attr-defined]


def test_a_pool_opens_half_as_many_again_at_a_peak_and_at_least_one() -> None:
    assert [peak_extra(n) for n in (1, 2, 3, 10, 20, 21)] == [1, 1, 1, 5, 10, 10]
