"""The fault tests' databases run with the settings their claims need (docs/durability.md).

A kill test shows that an acknowledged write survives; with PostgreSQL's ``fsync`` off that
would hold for a crash of memplane only, never of the machine. So the deployments the kill
tests use are asked, on the live database, what they run with: PostgreSQL (the durable
server of tests/support/postgres.py) ``fsync``, ``synchronous_commit`` and
``full_page_writes`` on; SQLite, configured exactly as the server is (its environment, the
embedded default's ``synchronous``), WAL with ``synchronous=FULL``: the log is synced at
each commit, so a write is on the disk before its answer (NORMAL would sync it only at a
checkpoint, and a power loss could take the last acknowledged writes).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from control_plane.runtime import Runtime
from control_plane.settings import Settings

from .conftest import Deployment

SQLITE_FULL = 2  # PRAGMA synchronous answers a number: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA


@pytest.fixture
def runtime(any_deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """The server's own configuration, in this process."""
    for name, value in any_deployment.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MEMPLANE_SQLITE_SYNCHRONOUS", raising=False)  # the default's choice
    rt = Runtime(Settings())
    try:
        yield rt
    finally:
        rt.close()


def test_the_kill_tests_database_keeps_what_it_acknowledges(any_deployment: Deployment,
                                                            runtime: Runtime) -> None:
    url = any_deployment.env["MEMPLANE_DATABASE_URL"]
    # The deployment's server answers writes on this database (it is live, not a fixture).
    with any_deployment.http() as http:
        written = http.put("/v1/memories/agent/durable/k", json={"value": 1})
    assert written.status_code == 200, written.text
    if url.startswith("sqlite"):
        assert runtime.settings.sqlite_synchronous == "FULL"
        with runtime.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == SQLITE_FULL
        return
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            shown = {name: connection.execute(text(f"SHOW {name}")).scalar()
                     for name in ("fsync", "synchronous_commit", "full_page_writes")}
    finally:
        engine.dispose()
    assert shown == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
