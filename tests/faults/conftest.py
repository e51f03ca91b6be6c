from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from tests.support.postgres import PostgresCluster
from tests.support.process import ServerProcess
from tests.support.service import RECEIPT_KEY

ADMIN_KEY = "mp_faults_" + secrets.token_hex(12)


@dataclass
class Deployment:
    """A production-shaped deployment: PostgreSQL, a bucket, a `memplane serve` process."""

    env: dict[str, str]
    server: ServerProcess
    bucket_root: Path

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.base_url, timeout=10,
                            headers={"Authorization": f"Bearer {ADMIN_KEY}"})


def make_env(database_url: str, data_dir: Path, bucket_url: str | None = None) -> dict[str, str]:
    engine = make_engine(database_url)
    upgrade(engine)
    engine.dispose()
    return {
        "MEMPLANE_DATABASE_URL": database_url, "MEMPLANE_SERVER_KEY": secrets.token_hex(32),
        "MEMPLANE_RECEIPT_SIGNING_KEY": RECEIPT_KEY,
        "MEMPLANE_DATA_DIR": str(data_dir), "MEMPLANE_ADMIN_KEY": ADMIN_KEY,
        "MEMPLANE_DEFAULT_BUCKET_URL": bucket_url or f"file://{data_dir / 'bucket'}",
        "MEMPLANE_RECONCILE_GRACE_SECONDS": "0",
        # No background search indexer: these tests count the bucket's objects exactly.
        "MEMPLANE_EMBED_ON_WRITE": "false",
    }


@pytest.fixture
def deployment(postgres: PostgresCluster, tmp_path: Path) -> Iterator[Deployment]:
    env = make_env(postgres.create_database(), tmp_path)
    server = ServerProcess(env).start()
    try:
        yield Deployment(env, server, tmp_path / "bucket")
    finally:
        server.stop()


@pytest.fixture(params=["postgresql", "sqlite"])
def any_deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    """``deployment`` on PostgreSQL and on the embedded default's SQLite file, for the tests
    that claim an acknowledged write survives: PostgreSQL is the durable server (fsync and
    synchronous commit on, tests/support/postgres.py), SQLite runs as the product
    configures it (WAL, ``synchronous=FULL``; test_durable_settings.py checks both)."""
    if request.param == "postgresql":
        url = request.getfixturevalue("durable_postgres").create_database()
    else:
        url = f"sqlite:///{tmp_path / 'memplane.db'}"
    env = make_env(url, tmp_path)
    server = ServerProcess(env).start()
    try:
        yield Deployment(env, server, tmp_path / "bucket")
    finally:
        server.stop()
