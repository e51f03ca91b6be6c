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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Uuid, bindparam, text

from control_plane.db.base import UTCDateTime
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
    """The same work done directly: the adapter call plus the one SQL statement it needs.

    For memplane a write or a read is not done until its audit row is durable (I6), so the
    statement the floor needs records the access too: on PostgreSQL one statement that
    upserts (or looks up) the pointer and appends the audit row, committed on its own; on
    SQLite, which has no data-modifying WITH, the same two statements in one transaction.
    ``audit=False`` gives the bare floor (pointer statement only) for reference.
    """

    def __init__(self, stack: MemplaneStack, *, audit: bool = True) -> None:
        self.engine = stack.runtime.engine
        self.postgres = self.engine.dialect.name == "postgresql"
        self.audit = audit
        self.tenant = stack.actor.tenant_id
        self.adapter = from_url(stack.env["MEMPLANE_DEFAULT_BUCKET_URL"])
        with self.engine.begin() as conn:
            conn.execute(text("CREATE TABLE IF NOT EXISTS bench_floor (key VARCHAR(200) PRIMARY "
                              "KEY, path VARCHAR(300), sha CHAR(64), size INTEGER)"))
        if self.postgres:
            self.engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        elif audit:  # reads write too: take the write lock up front, as memplane does
            self.engine = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        self.prefix = f"floor/{uuid.uuid4().hex}"

    def _audit(self, key: str) -> dict[str, Any]:
        return {"t": self.tenant, "d": key, "at": datetime.now(UTC)}

    def set(self, key: str, payload: bytes) -> None:
        path = f"{self.prefix}/{key}/{uuid.uuid4().hex}.json"
        self.adapter.put(path, payload)
        row = {"k": f"{self.prefix}/{key}", "p": path,
               "s": hashlib.sha256(payload).hexdigest(), "n": len(payload)}
        with self.engine.begin() as conn:
            if not self.audit:
                conn.execute(_FLOOR_UPSERT, row)
            elif self.postgres:
                conn.execute(_FLOOR_UPSERT_AUDITED, row | self._audit(key))
            else:
                conn.execute(_FLOOR_UPSERT, row)
                conn.execute(_FLOOR_AUDIT, self._audit(key))

    def get(self, key: str) -> bytes:
        params = {"k": f"{self.prefix}/{key}"}
        with self.engine.begin() as conn:
            if not self.audit:
                path, sha = conn.execute(_FLOOR_LOOKUP, params).one()
            elif self.postgres:
                path, sha = conn.execute(_FLOOR_LOOKUP_AUDITED, params | self._audit(key)).one()
            else:
                path, sha = conn.execute(_FLOOR_LOOKUP, params).one()
                conn.execute(_FLOOR_AUDIT, self._audit(key))
        data = self.adapter.get(path)
        if hashlib.sha256(data).hexdigest() != sha:
            raise AssertionError("floor read a different object")
        return data


_AUDIT_COLUMNS = ("INSERT INTO access_logs (tenant_id, accessor_type, accessor_id, operation, "
                  "success, detail, accessed_at) ")
_FLOOR_UPSERT = text("INSERT INTO bench_floor (key, path, sha, size) VALUES (:k, :p, :s, :n) "
                     "ON CONFLICT (key) DO UPDATE SET path = excluded.path, sha = excluded.sha, "
                     "size = excluded.size")
_FLOOR_LOOKUP = text("SELECT path, sha FROM bench_floor WHERE key = :k")
_AUDIT_TYPES = (bindparam("t", type_=Uuid), bindparam("at", type_=UTCDateTime()))
_FLOOR_AUDIT = text(_AUDIT_COLUMNS + "VALUES (:t, 'key', 'floor', 'read', true, :d, :at)"
                    ).bindparams(*_AUDIT_TYPES)
_FLOOR_UPSERT_AUDITED = text(
    "WITH up AS (INSERT INTO bench_floor (key, path, sha, size) VALUES (:k, :p, :s, :n) "
    "ON CONFLICT (key) DO UPDATE SET path = excluded.path, sha = excluded.sha, "
    "size = excluded.size RETURNING key) "
    + _AUDIT_COLUMNS + "SELECT CAST(:t AS uuid), 'key', 'floor', 'write', true, :d, :at FROM up")
_FLOOR_LOOKUP_AUDITED = text(
    "WITH p AS (SELECT path, sha FROM bench_floor WHERE key = :k), a AS ("
    + _AUDIT_COLUMNS + "SELECT CAST(:t AS uuid), 'key', 'floor', 'read', true, :d, :at FROM p) "
    "SELECT path, sha FROM p")


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
