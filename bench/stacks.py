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
from sqlalchemy import Engine, Uuid, bindparam, select, text

from control_plane.addresses import MemoryAddress, Scope
from control_plane.audit.batcher import AuditBatcher
from control_plane.db import direct
from control_plane.db.base import UTCDateTime
from control_plane.db.models import AccessLog
from control_plane.db.models import MemoryPointer as P
from control_plane.identity import authenticate
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.search.index_rows import wants_vector
from control_plane.settings import Settings
from control_plane.tenants.service import ensure_bootstrap
from storage_adapters.base import BatchAdapter
from storage_adapters.registry import from_url
from tests.support.emulators import MotoServer, free_port, new_s3_bucket
from tests.support.postgres import PostgresCluster

ADMIN_KEY = "mp_bench_" + secrets.token_hex(12)
META = MemoryMeta()


class Backends:
    """PostgreSQL and moto, started on first use."""

    def __init__(self, *, postgres_settings: tuple[str, ...] = ()) -> None:
        """``postgres_settings``: more ``name=value`` settings of the PostgreSQL server (a
        profile's ``shared_preload_libraries=pg_stat_statements``)."""
        self.root = Path(tempfile.mkdtemp(prefix="memplane-bench-"))
        self.postgres_settings = postgres_settings
        self._pg: PostgresCluster | None = None
        self._moto: MotoServer | None = None

    def database(self, kind: str) -> str | None:
        if kind == "sqlite":
            return None
        if self._pg is None:
            self._pg = PostgresCluster(  # durable: commits reach the disk
                durable=True, settings=self.postgres_settings).start()
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


def analyze(engine: Engine) -> None:
    """On PostgreSQL, the statistics a running deployment has: autovacuum analyzes the hot
    tables after 2,000 changes (migration 0019), but only once a minute, so a bench that
    fills a fresh database and measures within the minute would time plans made for an empty
    table (a lookup by address scanning all the tenant's rows). Called after a case's
    warm-up fill."""
    if engine.dialect.name != "postgresql":
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


# Server processes of each ``memplane serve`` the bench starts (``--workers``).
WORKERS = 1


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
        values: dict[str, Any] = {k[len("MEMPLANE_"):].lower(): v for k, v in self.env.items()}
        settings = Settings(**values)
        self.runtime = Runtime(settings)
        self.runtime.migrate()
        with self.runtime.sessions() as session:
            ensure_bootstrap(session, ADMIN_KEY)
            self.actor = authenticate(session, f"Bearer {ADMIN_KEY}").actor
        self.server: subprocess.Popen[bytes] | None = None
        self.floor_server: subprocess.Popen[bytes] | None = None
        self.base_url = self.floor_url = ""

    def set(self, key: str, value: Any) -> None:
        with self.runtime.sessions() as session:
            memories.set_value(session, self.runtime.plane, self.actor,
                               MemoryAddress.parse(Scope.user, "bench", key), value, META)

    def get(self, key: str) -> Any:
        with self.runtime.sessions() as session:
            return memories.get_value(session, self.runtime.plane, self.actor,
                                      MemoryAddress.parse(Scope.user, "bench", key)).value

    def analyze(self) -> None:
        analyze(self.runtime.engine)

    def settle(self, timeout: float = 120.0, poll: float = 0.05) -> None:
        """Wait until the server's background work on what the rounds wrote is done: every
        memory's vector made and every audit row sealed. The indexer and the sealer work
        after a write is answered; left to run during the next round, their CPU would fall
        on whatever is measured then (a floor, the peer) instead of on memplane. ``poll``: the
        seconds between checks (the sustained case times this wait)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.runtime.sessions() as session:
                waiting = session.scalar(select(P.id).where(wants_vector()).limit(1))
                unsealed = session.scalar(select(AccessLog.id).where(AccessLog.seq.is_(None))
                                          .limit(1))
            if waiting is None and unsealed is None:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server's background work was not done after "
                                   f"{timeout:.0f} s (memories to index: {waiting is not None}"
                                   f", audit rows to seal: {unsealed is not None})")
            time.sleep(poll)

    def serve(self) -> str:
        """``memplane serve`` in its own process (uvicorn, ``WORKERS`` workers: one unless
        ``python -m bench --workers N``), serving this checkout's code: the console script
        imports from the checkout the shared environment was installed from (an editable
        install) unless PYTHONPATH names this one first."""
        exe = Path(sys.executable).with_name("memplane")
        checkout = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (checkout, os.environ.get("PYTHONPATH")) if p)
        self.server, self.base_url = _start([str(exe), "serve"], self.env | {
            "PYTHONPATH": path, "MEMPLANE_WORKERS": str(WORKERS)})
        return self.base_url

    def serve_floor(self) -> str:
        """The HTTP floor (bench/http_floor.py) in its own process, on the same uvicorn
        settings, database and bucket as ``serve``."""
        env = self.env | {"BENCH_FLOOR_TENANT": str(self.actor.tenant_id),
                          "BENCH_FLOOR_PREFIX": f"floor/{uuid.uuid4().hex}"}
        self.floor_server, self.floor_url = _start(
            [sys.executable, "-m", "bench.http_floor", "--workers", str(WORKERS)], env)
        return self.floor_url

    def http_client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=60, limits=_LIMITS,
                            headers={"Authorization": f"Bearer {ADMIN_KEY}"})

    def floor_client(self) -> httpx.Client:
        return httpx.Client(base_url=self.floor_url, timeout=60, limits=_LIMITS)

    def close(self) -> None:
        for server in (self.server, self.floor_server):
            if server is not None:
                server.terminate()
                server.wait(timeout=15)
        self.runtime.close()


# A client drops an idle connection well before uvicorn's keep-alive timeout (5 s) closes it:
# with equal timeouts a request sent on a connection the server is closing at that moment
# fails with a reset (the rounds leave each system idle while the others run).
_LIMITS = httpx.Limits(keepalive_expiry=2.0)


def _start(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [*command, "--port", str(port)], env={**os.environ, **env, "MEMPLANE_LOG_LEVEL": "WARNING"},
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60 * WORKERS  # each worker process imports the app
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{command[-1]} exited with {process.returncode} on start")
        try:
            if httpx.get(f"{base_url}/readyz").status_code == 200:
                return process, base_url
        except httpx.TransportError:
            time.sleep(0.1)  # polling a starting server, not synchronising threads
    process.terminate()
    raise RuntimeError(f"{command[-1]} did not start")


class Floor:
    """The same work done the best direct way: the adapter call plus the one SQL statement
    it needs, on the same driver path and audited the same way as memplane.

    For memplane a write or a read is not done until its audit row is durable (I6), so the
    floor records each access too. A write: on PostgreSQL one statement that upserts the
    pointer and appends its audit row, run straight on the psycopg connection in autocommit
    (``db.direct``, memplane's hot path), committed on its own; on SQLite, which has no
    data-modifying WITH, the same two statements in one write transaction. A read: the
    lookup, the object fetched and its SHA-256 compared, and its audit row: on PostgreSQL
    appended by the lookup itself (one statement through ``db.direct``, one round trip,
    committed before the fetch, as memplane's read of a known address), on SQLite through an
    ``AuditBatcher`` after the check (concurrent reads share one commit, as memplane's do).
    ``audit=False`` gives the bare floor (no audit row at all) for reference.
    """

    def __init__(self, engine: Engine | MemplaneStack, bucket_url: str = "",
                 tenant_id: uuid.UUID | None = None, *, audit: bool = True,
                 prefix: str | None = None) -> None:
        if isinstance(engine, MemplaneStack):  # Floor(stack), as the bench called it before
            stack = engine
            engine, bucket_url = stack.runtime.engine, stack.env["MEMPLANE_DEFAULT_BUCKET_URL"]
            tenant_id = stack.actor.tenant_id
        if tenant_id is None or not bucket_url:
            raise ValueError("a floor needs a bucket URL and the tenant its audit rows name")
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self.audit = audit
        self.tenant = tenant_id
        self.adapter = from_url(bucket_url)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE IF NOT EXISTS bench_floor (key VARCHAR(200) PRIMARY "
                              "KEY, path VARCHAR(300), sha CHAR(64), size INTEGER)"))
        # SQLite writes take the write lock up front, as memplane's do
        self.writer = engine if self.postgres else engine.execution_options(
            sqlite_begin="IMMEDIATE")
        # SQLite's reads group-commit their audit rows; PostgreSQL's lookup appends its own
        self.batcher = AuditBatcher(engine) if audit and not self.postgres else None
        # Its keys' place in the bucket and the table: one of its own unless given (the
        # processes of one served floor share theirs).
        self.prefix = prefix or f"floor/{uuid.uuid4().hex}"

    @classmethod
    def of(cls, stack: MemplaneStack, *, audit: bool = True) -> Floor:
        return cls(stack, audit=audit)

    def _audit(self, key: str) -> dict[str, Any]:
        return {"t": self.tenant, "d": key, "at": datetime.now(UTC)}

    def set(self, key: str, payload: bytes) -> None:
        path = f"{self.prefix}/{key}/{uuid.uuid4().hex}.json"
        self.adapter.put(path, payload)
        row = {"k": f"{self.prefix}/{key}", "p": path,
               "s": hashlib.sha256(payload).hexdigest(), "n": len(payload)}
        if self.postgres:
            direct.run(self.engine, _FLOOR_UPSERT_AUDITED if self.audit else _FLOOR_UPSERT,
                       row | self._audit(key))
            return
        with self.writer.begin() as conn:
            conn.execute(_FLOOR_UPSERT, row)
            if self.audit:
                conn.execute(_FLOOR_AUDIT, self._audit(key))

    def set_many(self, items: list[tuple[str, bytes]]) -> None:
        """Many writes the best direct way: the objects stored together (a local bucket's
        ``put_many``: one flush for all), then every pointer row and its audit row in ONE
        transaction (the driver's executemany, pipelined on PostgreSQL)."""
        paths = [f"{self.prefix}/{key}/{uuid.uuid4().hex}.json" for key, _ in items]
        stored = list(zip(paths, (payload for _, payload in items), strict=True))
        if isinstance(self.adapter, BatchAdapter):
            failed = [error for error in self.adapter.put_many(stored) if error is not None]
            if failed:
                raise failed[0]
        else:
            for path, payload in stored:
                self.adapter.put(path, payload)
        rows = [{"k": f"{self.prefix}/{key}", "p": path,
                 "s": hashlib.sha256(payload).hexdigest(), "n": len(payload)}
                | self._audit(key) for (key, payload), path in zip(items, paths, strict=True)]
        with self.writer.begin() as conn:
            if self.postgres and self.audit:
                conn.execute(_FLOOR_UPSERT_AUDITED, rows)
                return
            conn.execute(_FLOOR_UPSERT, rows)
            if self.audit:
                conn.execute(_FLOOR_AUDIT, rows)

    def get(self, key: str) -> bytes:
        params = {"k": f"{self.prefix}/{key}"}
        if self.postgres and self.audit:  # one round trip: the lookup appends the read's row
            ((path, sha),) = direct.run(self.engine, _FLOOR_LOOKUP_AUDITED,
                                        params | self._audit(key))
        elif self.postgres:
            ((path, sha),) = direct.run(self.engine, _FLOOR_LOOKUP, params)
        else:
            with self.engine.connect() as conn:
                path, sha = conn.execute(_FLOOR_LOOKUP, params).one()
        data = self.adapter.get(path)
        if hashlib.sha256(data).hexdigest() != sha:
            if self.postgres and self.audit:  # the read's row went in: log its failure too
                direct.run(self.engine, _FLOOR_READ_FAILED, self._audit(key))
            raise AssertionError("floor read a different object")
        if self.batcher is not None:
            self.batcher.record(self.tenant, "key", "floor", "read", detail=key)
        return data

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        self.adapter.close()


_AUDIT_COLUMNS = ("INSERT INTO access_logs (tenant_id, accessor_type, accessor_id, operation, "
                  "success, detail, accessed_at) ")
_FLOOR_UPSERT = text("INSERT INTO bench_floor (key, path, sha, size) VALUES (:k, :p, :s, :n) "
                     "ON CONFLICT (key) DO UPDATE SET path = excluded.path, sha = excluded.sha, "
                     "size = excluded.size")
_FLOOR_LOOKUP = text("SELECT path, sha FROM bench_floor WHERE key = :k")
_AUDIT_TYPES = (bindparam("t", type_=Uuid), bindparam("at", type_=UTCDateTime()))
_FLOOR_AUDIT = text(_AUDIT_COLUMNS + "VALUES (:t, 'key', 'floor', 'write', true, :d, :at)"
                    ).bindparams(*_AUDIT_TYPES)  # SQLite's writes (reads go through the batcher)
_FLOOR_UPSERT_AUDITED = text(
    "WITH up AS (INSERT INTO bench_floor (key, path, sha, size) VALUES (:k, :p, :s, :n) "
    "ON CONFLICT (key) DO UPDATE SET path = excluded.path, sha = excluded.sha, "
    "size = excluded.size RETURNING key) "
    + _AUDIT_COLUMNS + "SELECT CAST(:t AS uuid), 'key', 'floor', 'write', true, :d, :at FROM up")
# PostgreSQL's read, as memplane's hot path reads a known address (READ_LOGGED_POSTGRES): the
# lookup appends the read's audit row in the same statement, committed before the fetch.
_FLOOR_LOOKUP_AUDITED = text(
    "WITH found AS (SELECT path, sha FROM bench_floor WHERE key = :k), aud AS ("
    + _AUDIT_COLUMNS + "SELECT CAST(:t AS uuid), 'key', 'floor', 'read', true, :d, :at "
    "FROM found) SELECT path, sha FROM found").bindparams(*_AUDIT_TYPES)
_FLOOR_READ_FAILED = text(_AUDIT_COLUMNS + "VALUES (:t, 'key', 'floor', 'read', false, :d, :at)"
                          ).bindparams(*_AUDIT_TYPES)

def op_factory(fn: Callable[[str], Any], prefix: str) -> Callable[[int], Any]:
    return lambda i: fn(f"{prefix}{i}")


class Peer:
    """LangGraph's PostgresStore: content in PostgreSQL itself, the closest open peer for a
    memory store's put/get, on the same PostgreSQL server in the same run.

    Each thread gets its own store (its own connection): one store takes a store-wide lock
    per ``batch()``, so a shared one would run one thread at a time.
    """

    def __init__(self, backends: Backends, stores: int) -> None:
        from langgraph.store.postgres import PostgresStore
        from sqlalchemy.engine import make_url

        url = make_url(backends.database("postgres") or "")
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._cms = [PostgresStore.from_conn_string(dsn) for _ in range(stores)]
        self.stores = [cm.__enter__() for cm in self._cms]
        self.stores[0].setup()

    def set(self, key: str, value: dict[str, Any], thread: int = 0) -> None:
        self.stores[thread].put(("bench", "user"), key, value)

    def get(self, key: str, thread: int = 0) -> Any:
        item = self.stores[thread].get(("bench", "user"), key)
        assert item is not None
        return item.value

    def close(self) -> None:
        for cm in self._cms:
            cm.__exit__(None, None, None)
