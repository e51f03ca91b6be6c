"""Tenants on an embedded SQLite file and a local default bucket, with no server and no
sealer of their own: the audit checkpoint tests (``test_checkpoint_*.py``) decide when rows
are sealed, when a head is anchored and at what time, so every checkpoint's name, content
and place is known exactly. A bucket can be made to fail at a chosen object (``faults``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from control_plane.audit import checkpoints
from control_plane.audit import service as audit
from control_plane.db.base import Base, new_id
from control_plane.db.engine import begin_write, make_engine
from control_plane.db.models import AuditHead, StorageConfig, Tenant
from control_plane.identity import Actor
from control_plane.plane.data_plane import DataPlane, default_config
from control_plane.settings import Settings
from control_plane.signing import SigningKey, signing_key
from storage_adapters import base as storage

T0 = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)

# path fragment -> what happens before a put (or a listing) of a path containing it
Faults = dict[str, Callable[[str], None]]


class FaultyAdapter:
    """A bucket that runs ``faults`` before a put or listing of a path naming their key (to
    fail there, or to let another writer in first), and is otherwise the bucket itself."""

    def __init__(self, inner: storage.StorageAdapter, faults: Faults) -> None:
        self._inner, self._faults = inner, faults

    def _hit(self, path: str, op: str) -> None:
        for fragment, fault in list(self._faults.items()):
            if fragment.startswith(op + ":") and fragment[len(op) + 1:] in path:
                fault(path)

    def put(self, path: str, data: bytes) -> None:
        self._hit(path, "put")
        self._inner.put(path, data)

    def list(self, prefix: str) -> Iterator[storage.ObjectInfo]:
        self._hit(prefix, "list")
        return iter(list(self._inner.list(prefix)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Plane(DataPlane):
    """The data plane whose every bucket goes through ``faults``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.faults: Faults = {}

    @property
    def default_adapter(self) -> storage.StorageAdapter:
        return FaultyAdapter(super().default_adapter, self.faults)  # type: ignore[return-value]

    def guarded(self, tenant_id: uuid.UUID,
                adapter: storage.StorageAdapter) -> storage.StorageAdapter:
        return FaultyAdapter(super().guarded(tenant_id, adapter), self.faults)  # type: ignore[return-value]


def down(_path: str) -> None:
    raise storage.StorageUnavailable("the bucket is down")


@dataclass
class World:
    settings: Settings
    engine: Engine
    plane: Plane
    sessions: sessionmaker[Session]
    tenant: uuid.UUID
    tenants: list[uuid.UUID] = field(default_factory=list)

    @property
    def bucket(self) -> Path:
        return self.settings.data_dir / "bucket"

    @property
    def key(self) -> SigningKey:
        return signing_key(self.settings)

    def new_tenant(self) -> uuid.UUID:
        with self.sessions() as session:
            tenant = Tenant(name=f"t-{uuid.uuid4().hex[:8]}")
            session.add(tenant)
            session.flush()
            session.add(default_config(tenant.id))
            audit.create_head(session, tenant.id)
            session.commit()
            self.tenants.append(tenant.id)
            return tenant.id

    def append(self, n: int, tenant: uuid.UUID | None = None) -> int:
        """``n`` sealed audit rows more; the head's seq."""
        tid = tenant or self.tenant
        with self.sessions() as session:
            begin_write(session)
            for i in range(n):
                audit.record(session, Actor(tid, "api", "k"), "write", detail=f"row {i}")
            session.commit()
            audit.seal(session, tid)
        return self.head(tid).last_seq

    def anchor(self, at: datetime, tenant: uuid.UUID | None = None, *,
               seal: bool = True, plane: DataPlane | None = None) -> bool:
        with self.sessions() as session:
            return checkpoints.anchor(session, plane or self.plane, self.settings,
                                      tenant or self.tenant, now=at,
                                      seal=audit.seal if seal else None)

    def due(self, at: datetime) -> int:
        with self.sessions() as session:
            return checkpoints.anchor_due(session, self.plane, self.settings, now=at,
                                          seal=audit.seal)

    def check(self, tenant: uuid.UUID | None = None) -> checkpoints.CheckpointReport:
        with self.sessions() as session:
            return checkpoints.check(session, self.plane, self.settings, tenant or self.tenant)

    def settle(self, tenant: uuid.UUID | None = None) -> bool:
        with self.sessions() as session:
            return checkpoints.settle_unrecorded(session, self.plane, self.settings,
                                                 tenant or self.tenant)

    def head(self, tenant: uuid.UUID | None = None) -> AuditHead:
        with self.sessions() as session:
            head = session.get(AuditHead, tenant or self.tenant)
            assert head is not None
            session.expunge(head)
            return head

    def set_head(self, tenant: uuid.UUID | None = None, **values: Any) -> None:
        with self.sessions() as session:
            begin_write(session)
            session.execute(update(AuditHead).where(
                AuditHead.tenant_id == (tenant or self.tenant)).values(**values))
            session.commit()

    def config(self, tenant: uuid.UUID | None = None) -> uuid.UUID:
        with self.sessions() as session:
            return self.plane.active(session, tenant or self.tenant).config_id

    def move_to(self, prefix: str | None = None, *, storage_type: str = "default",
                connection_config: dict[str, Any] | None = None) -> uuid.UUID:
        """Retire the tenant's storage and make a new one active (a default-bucket place at
        ``prefix`` by default); returns its id."""
        tid = self.tenant
        with self.sessions() as session:
            begin_write(session)
            session.execute(update(StorageConfig).where(StorageConfig.tenant_id == tid)
                            .values(is_active=False))
            made = StorageConfig(id=new_id(), tenant_id=tid, storage_type=storage_type,
                                 prefix=prefix if prefix is not None else f"tenants/{tid}/moved",
                                 connection_config=connection_config or {}, is_active=True)
            session.add(made)
            session.commit()
            config_id = made.id
        self.plane.forget_tenant(tid)
        return config_id

    def folder(self, prefix: str | None = None) -> Path:
        return self.bucket / (prefix or f"tenants/{self.tenant}") / "audit" / "checkpoints"

    def files(self, prefix: str | None = None) -> list[str]:
        folder = self.folder(prefix)
        return sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.exists() else []

    def body(self, seq: int, *, moved: bool = False, prefix: str | None = None) -> Any:
        name = checkpoints.checkpoint_name(seq, moved=moved)
        return json.loads((self.folder(prefix) / name).read_bytes())

    def place(self, config_id: uuid.UUID | None = None, prefix: str | None = None
              ) -> dict[str, Any]:
        """A default-bucket place as a checkpoint's ``anchor`` describes it."""
        return {"storage_config_id": f"sc_{config_id.hex}" if config_id else None,
                "storage_type": "default", "bucket": None, "endpoint": None,
                "prefix": prefix or f"tenants/{self.tenant}"}

    def sign_into(self, body: dict[str, Any], name: str, prefix: str | None = None) -> None:
        """Write ``body`` signed with this server's checkpoint key, as the sealer writes."""
        body = {k: v for k, v in body.items() if k != "signature"}
        body["signature"] = self.key.sign(body)
        folder = self.folder(prefix)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(body, sort_keys=True, separators=(",", ":")))


def make_world(data_dir: Path, **overrides: Any) -> Iterator[World]:
    values: dict[str, Any] = dict(
        data_dir=data_dir, database_url=None, default_bucket_url=None, admin_key=None,
        receipt_signing_key=None, audit_checkpoint_seconds=60)
    values.update(overrides)
    settings = Settings(**values)
    engine = make_engine(settings.resolved_database_url, sqlite_synchronous="OFF")
    Base.metadata.create_all(engine)
    plane = Plane(settings.resolved_bucket_url)
    world = World(settings, engine, plane, sessionmaker(engine, expire_on_commit=False),
                  uuid.UUID(int=0))
    world.tenant = world.new_tenant()
    try:
        yield world
    finally:
        plane.close()
        engine.dispose()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def postgres_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster (or ``MEMPLANE_TEST_DATABASE_URL``'s server) for the
    ``--noconftest`` tests of PostgreSQL-only paths: as a module fixture,
    ``cluster = pytest.fixture(scope="module")(postgres_cluster)``."""
    from tests.support.postgres import _session_cluster

    yield from _session_cluster(False, "MEMPLANE_TEST_DATABASE_URL")


def postgres_world(cluster: Any, tmp_path: Path) -> Iterator[World]:
    """A world on a fresh database of ``cluster``: ``world = pytest.fixture(postgres_world)``."""
    import secrets

    yield from make_world(tmp_path, database_url=cluster.create_database(),
                          server_key=secrets.token_hex(32))
