"""The systems under test: memplane (in-process and over HTTP) and the floor, on SQLite or
PostgreSQL, with a local or an S3 (moto) bucket. Backends start here and stop at the end."""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from control_plane.memories import service as memories
from control_plane.memories.addresses import MemoryAddress, Scope
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import authenticate, ensure_bootstrap
from storage_adapters.registry import from_url
from tests.support.emulators import MotoServer, free_port, new_s3_bucket
from tests.support.postgres import PostgresCluster

ADMIN_KEY = "mp_bench_" + secrets.token_hex(12)
META = MemoryMeta()


class Backends:
    """PostgreSQL and moto, started on first use."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memplane-bench-"))
        self._pg: PostgresCluster | None = None
        self._moto: MotoServer | None = None

    def database(self, kind: str) -> str | None:
        if kind == "sqlite":
            return None
        if self._pg is None:
            self._pg = PostgresCluster(durable=True).start()  # commits reach the disk
        return self._pg.create_database()

    def bucket_url(self, kind: str, name: str) -> str:
        if kind == "local":
            return f"file://{self.root / name / 'bucket'}"
        if self._moto is None:
            self._moto = MotoServer()
            self._moto.start()
        config = new_s3_bucket(self._moto)
        query = "&".join(f"{k}={v}" for k, v in config.items() if k != "bucket")
        return f"s3://{config['bucket']}?{query}"

    def close(self) -> None:
        if self._moto is not None:
            self._moto.stop()
        if self._pg is not None:
            self._pg.stop()


class MemplaneStack:
    """One memplane deployment: a runtime for in-process calls, a server for HTTP calls."""

    def __init__(self, backends: Backends, database: str, bucket: str) -> None:
        name = f"{database}-{bucket}-{uuid.uuid4().hex[:6]}"
        self.data_dir = backends.root / name
        url = backends.database(database)
        self.env = {"MEMPLANE_DATA_DIR": str(self.data_dir), "MEMPLANE_ADMIN_KEY": ADMIN_KEY,
                    "MEMPLANE_DEFAULT_BUCKET_URL": backends.bucket_url(bucket, name)}
        if url:
            self.env |= {"MEMPLANE_DATABASE_URL": url, "MEMPLANE_SERVER_KEY": secrets.token_hex(24)}
        settings = Settings(**{k[len("MEMPLANE_"):].lower(): v for k, v in self.env.items()})
        self.runtime = Runtime(settings)
        self.runtime.migrate()
        with self.runtime.sessions() as session:
            ensure_bootstrap(session, ADMIN_KEY)
            self.actor = authenticate(session, f"Bearer {ADMIN_KEY}").actor
        self.server: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def set(self, key: str, value: Any) -> None:
        with self.runtime.sessions() as session:
            memories.set_value(session, self.runtime.plane, self.actor,
                               MemoryAddress.parse(Scope.user, "bench", key), value, META)

    def get(self, key: str) -> Any:
        with self.runtime.sessions() as session:
            return memories.get_value(session, self.runtime.plane, self.actor,
                                      MemoryAddress.parse(Scope.user, "bench", key)).value

    def serve(self) -> str:
        port = free_port()
        exe = Path(sys.executable).with_name("memplane")
        env = {**os.environ, **self.env, "MEMPLANE_LOG_LEVEL": "WARNING"}
        self.server = subprocess.Popen([str(exe), "serve", "--port", str(port)], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/readyz").status_code == 200:
                    return self.base_url
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("memplane serve did not start")

    def http_client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=60,
                            headers={"Authorization": f"Bearer {ADMIN_KEY}"})

    def close(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=15)
        self.runtime.close()


class Floor:
    """The same work done directly: one adapter call plus the one SQL statement it needs."""

    def __init__(self, stack: MemplaneStack) -> None:
        self.engine = stack.runtime.engine
        self.adapter = from_url(stack.env["MEMPLANE_DEFAULT_BUCKET_URL"])
        with self.engine.begin() as conn:
            conn.execute(text("CREATE TABLE IF NOT EXISTS bench_floor (key VARCHAR(200) PRIMARY "
                              "KEY, path VARCHAR(300), sha CHAR(64), size INTEGER)"))
        self.prefix = f"floor/{uuid.uuid4().hex}"

    def set(self, key: str, payload: bytes) -> None:
        path = f"{self.prefix}/{key}/{uuid.uuid4().hex}.json"
        self.adapter.put(path, payload)
        with self.engine.begin() as conn:
            conn.execute(text("INSERT INTO bench_floor (key, path, sha, size) "
                              "VALUES (:k, :p, :s, :n)"),
                         {"k": f"{self.prefix}/{key}", "p": path,
                          "s": hashlib.sha256(payload).hexdigest(), "n": len(payload)})

    def get(self, key: str) -> bytes:
        with self.engine.begin() as conn:
            path, sha = conn.execute(text("SELECT path, sha FROM bench_floor WHERE key = :k"),
                                     {"k": f"{self.prefix}/{key}"}).one()
        data = self.adapter.get(path)
        if hashlib.sha256(data).hexdigest() != sha:
            raise AssertionError("floor read a different object")
        return data


def op_factory(fn: Callable[[str], Any], prefix: str) -> Callable[[int], Any]:
    return lambda i: fn(f"{prefix}{i}")


class Peer:
    """LangGraph's PostgresStore: content in PostgreSQL itself, the closest open peer for a
    memory store's put/get, on the same PostgreSQL server in the same run."""

    def __init__(self, backends: Backends, concurrency: int) -> None:
        from langgraph.store.postgres import PostgresStore
        from sqlalchemy.engine import make_url

        url = make_url(backends.database("postgres") or "")
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._cm = PostgresStore.from_conn_string(
            dsn, pool_config={"min_size": 1, "max_size": max(2, concurrency)})
        self.store = self._cm.__enter__()
        self.store.setup()

    def set(self, key: str, value: dict[str, Any]) -> None:
        self.store.put(("bench", "user"), key, value)

    def get(self, key: str) -> Any:
        item = self.store.get(("bench", "user"), key)
        assert item is not None
        return item.value

    def close(self) -> None:
        self._cm.__exit__(None, None, None)
