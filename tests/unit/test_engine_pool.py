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
