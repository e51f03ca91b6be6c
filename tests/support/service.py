"""Fixtures that run the real service: a migrated database per backend (SQLite, PostgreSQL),
a live uvicorn server on it, and a fresh tenant per test driven through the SDK.

Tests isolate by tenant: each one gets a tenant of its own on a shared server, so nothing a
test asserts can be disturbed by another.
"""

from __future__ import annotations

import base64
import secrets
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine

import memplane
from control_plane.app import create_app
from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.runtime import Runtime
from control_plane.settings import Settings

from .emulators import free_port

BOOTSTRAP_KEY = "mp_bootstrap_" + secrets.token_hex(16)
RECEIPT_KEY = base64.b64encode(secrets.token_bytes(32)).decode()
BACKENDS = ["sqlite", "postgres"]


def isolated_database(database: str, request: pytest.FixtureRequest) -> str:
    """``database`` itself for SQLite (each server gets its own file), else a fresh, migrated
    PostgreSQL database that no other test's server or worker sees."""
    if database == "sqlite":
        return database
    url: str = request.getfixturevalue("postgres").create_database()
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def make_settings(database: str, data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        data_dir=data_dir, admin_key=BOOTSTRAP_KEY, audit_seal_interval_seconds=0.2,
        reconcile_grace_seconds=0,
        # Tests place local buckets in their own temporary directories.
        local_storage_roots=[Path(tempfile.gettempdir())],
        # The emulators listen on 127.0.0.1, which the endpoint guard refuses unless the
        # operator's allow-list covers it.
        allowed_endpoints=["127.0.0.1/32"],
        # No scheduled compaction on the shared test databases: it would compact other
        # tests' old events behind their backs (tests/compactor runs it on databases of
        # its own).
        compactor_schedule="off",
        # Nor a scheduled retention run: it would delete other tests' expired memories behind
        # their backs and take SQLite's write lock meanwhile (tests/retention turn it on).
        retention_schedule="off",
        # No background search indexer on the shared servers: its vectors and segments
        # would appear in other tests' bucket listings (tests/search turn it on).
        embed_on_write=False,
    )
    if database != "sqlite":
        values.update(database_url=database, server_key=secrets.token_hex(24),
                      default_bucket_url=f"file://{data_dir / 'bucket'}",
                      allow_local_storage=True)
        # A shared database has no embedded key file: receipts need a configured key.
        values.update(receipt_signing_key=RECEIPT_KEY)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated, shared database: 'sqlite' (embedded default) or a PostgreSQL URL."""
    if request.param == "sqlite":
        return "sqlite"
    pg = request.getfixturevalue("postgres")
    url = pg.create_database()
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("databases")
        chosen = list(marker.args) if marker else BACKENDS
        metafunc.parametrize("database", chosen, indirect=True, scope="session")


@dataclass
class Stack:
    """A running server plus direct handles on its database and bucket, for assertions."""

    base_url: str
    settings: Settings
    runtime: Runtime

    @property
    def engine(self) -> Engine:
        return self.runtime.engine

    @property
    def bucket_root(self) -> Path:
        return self.settings.data_dir / "bucket"

    def client(self, api_key: str, **kwargs: Any) -> memplane.Client:
        return memplane.Client(self.base_url, api_key, **kwargs)

    def http(self, api_key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30)

    def new_tenant(self) -> Tenant:
        with self.client(BOOTSTRAP_KEY) as admin:
            created = admin.tenants.create(name=f"tenant-{uuid.uuid4().hex[:8]}")
        return Tenant(self, uuid.UUID(str(created.tenant.id)), created.api_key)


@dataclass
class Tenant:
    stack: Stack
    id: uuid.UUID
    admin_key: str

    def client(self, **kwargs: Any) -> memplane.Client:
        return self.stack.client(self.admin_key, **kwargs)

    def key(self, role: str) -> str:
        with self.client() as admin:
            return admin.keys.create(role=role, name=f"{role} key").api_key

    @property
    def bucket_dir(self) -> Path:
        return self.stack.bucket_root / "tenants" / str(self.id)

    def objects(self) -> list[Path]:
        if not self.bucket_dir.exists():
            return []
        # The audit chain's signed checkpoints (audit/checkpoints/) are not memory content.
        return sorted(p for p in self.bucket_dir.rglob("*")
                      if p.is_file() and p.relative_to(self.bucket_dir).parts[0] != "audit")


class ServerThread:
    def __init__(self, settings: Settings) -> None:
        self.app = create_app(settings)
        self.port = free_port()
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the memplane server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


@pytest.fixture(scope="session")
def stack(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp(f"stack-{'sqlite' if database == 'sqlite' else 'pg'}")
    settings = make_settings(database, data_dir)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


@pytest.fixture
def tenant(stack: Stack) -> Tenant:
    return stack.new_tenant()


@pytest.fixture
def client(tenant: Tenant) -> Iterator[memplane.Client]:
    with tenant.client() as c:
        yield c


class SimulatedCrash(BaseException):
    """Raised at a protocol step to stop it dead, as a killed process would: no cleanup
    handler (they catch Exception) runs, and the session is abandoned mid-transaction."""


@dataclass
class ServiceWorld:
    """The services without HTTP: a runtime on a migrated database, one fresh tenant."""

    runtime: Runtime
    tenant_id: uuid.UUID
    crash_at: str | None = None

    def checkpoint(self, step: str) -> None:
        if step == self.crash_at:
            self.crash_at = None
            raise SimulatedCrash(step)

    @property
    def actor(self) -> Any:
        from control_plane.identity import Actor

        return Actor(self.tenant_id, "api", "test")

    def write(self, address: Any, value: Any, meta: Any = None) -> Any:
        """The pointer of a value written as the tenant's API key would (``meta``: a
        ``MemoryMeta``, none by default)."""
        from control_plane.db.models import MemoryPointer
        from control_plane.memories import service as memories
        from control_plane.memories.schemas import MemoryMeta

        with self.runtime.sessions() as session:
            written = memories.set_value(session, self.runtime.plane, self.actor, address,
                                         value, meta or MemoryMeta())
        assert isinstance(written, MemoryPointer)
        return written

    def objects(self) -> set[str]:
        """The paths of the memory objects in the tenant's active bucket."""
        with self.runtime.sessions() as session:
            target = self.runtime.plane.active(session, self.tenant_id)
        return {info.path for info in target.adapter.list(target.path("memories") + "/")}

    def read(self, address: Any) -> Any:
        """The memory's value, read as the tenant's API key would."""
        from control_plane.memories import service as memories

        with self.runtime.sessions() as session:
            return memories.get_value(session, self.runtime.plane, self.actor, address).value

    def erasing(self, user_id: str) -> uuid.UUID:
        """The erasure of the tenant's data subject ``user_id`` started (the row its job holds
        while it runs, so writes for that subject are refused); the job's id."""
        from control_plane.db.base import new_id, utcnow
        from control_plane.db.models import SubjectErasure

        job_id = new_id()
        with self.runtime.sessions() as session:
            session.add(SubjectErasure(tenant_id=self.tenant_id, user_id=user_id,
                                       job_id=job_id, started_at=utcnow()))
            session.commit()
        return job_id

    def lose_commit(self, session: Any, step: str = "write:before_commit") -> Exception:
        """The first commit of ``session`` after the plane's ``step`` loses its connection:
        it raises the returned error (the server closed the connection, so the outcome is
        unknown) and commits nothing; the session's later commits are its own again."""
        from sqlalchemy import exc as sa_exc

        lost = sa_exc.OperationalError("COMMIT", {}, Exception("server closed the connection"))

        def dropped() -> None:
            del session.commit  # only this commit is lost
            raise lost

        def at(name: str) -> None:
            if name == step:
                session.commit = dropped

        self.runtime.plane.checkpoint = at
        return lost


def own_runtime(database: str, request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Runtime]:
    """A runtime without HTTP on a migrated database that no server sees."""
    url = isolated_database(database, request)
    runtime = Runtime(make_settings(url, tmp_path_factory.mktemp(name)))
    if url == "sqlite":
        runtime.migrate()
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture(scope="session")
def service_runtime(database: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """A database of its own, not the ``stack`` server's: that server's audit sealer chains
    every tenant's rows on its own schedule, while these tests hold seals and
    verifications at chosen steps and count what each one did."""
    yield from own_runtime(database, request, tmp_path_factory, "services")


@pytest.fixture
def world(service_runtime: Runtime) -> Iterator[ServiceWorld]:
    from control_plane.tenants.service import create_tenant

    with service_runtime.sessions() as session:
        created, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    w = ServiceWorld(service_runtime, created.id)
    service_runtime.plane.checkpoint = w.checkpoint
    try:
        yield w
    finally:
        from control_plane.plane.data_plane import no_faults

        service_runtime.plane.checkpoint = no_faults
