"""Helpers for the reconciler's and orphan GC's cases: pointers and objects made as a crash
would leave them, in the world's real local bucket and real database."""

from __future__ import annotations

import hashlib
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.audit import checkpoints
from control_plane.audit import service as audit
from control_plane.db.base import new_id, utcnow
from control_plane.db.models import (
    AccessLog,
    AuditHead,
    GcCandidate,
    MemoryPointer,
    StorageConfig,
)
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.plane.data_plane import Target
from control_plane.tenants.service import create_tenant
from storage_adapters.local import LocalAdapter
from tests.support.crypto import seal_for
from tests.support.service import ServiceWorld

HOUR = timedelta(hours=1)


def target(world: ServiceWorld, config_id: uuid.UUID | None = None) -> Target:
    with world.runtime.sessions() as session:
        if config_id is None:
            return world.runtime.plane.active(session, world.tenant_id)
        return world.runtime.plane.by_id(session, config_id)


def file_of(where: Target, path: str) -> Path:
    root = getattr(where.adapter, "root", None)  # a tenant's own bucket is wrapped
    assert isinstance(where.adapter, LocalAdapter) or root is not None
    return Path(str(root)) / path


def age(where: Target, path: str, by: timedelta) -> None:
    """Set the object's modification time ``by`` into the past."""
    stamp = (utcnow() - by).timestamp()
    os.utime(file_of(where, path), (stamp, stamp))


def put(where: Target, relative: str, data: bytes = b"left by a crash", *,
        old: bool = True) -> str:
    path = where.path(relative)
    where.adapter.put(path, data)
    if old:
        age(where, path, 2 * HOUR)
    return path


def listed(where: Target, prefix: str = "memories") -> set[str]:
    return {info.path for info in where.adapter.list(where.path(prefix) + "/")}


def pointer(world: ServiceWorld, where: Target, key: str, status: str, *,
            stored: bytes | None = b"", content: bytes | None = None,
            updated: datetime | None = None) -> MemoryPointer:
    """A pointer row in ``status`` for ``content`` (default ``"<key>"``). ``stored``: b"" puts
    the content sealed as its write would, None puts nothing, other bytes are put as they
    are."""
    data = content if content is not None else f'"{key}"'.encode()
    path = where.path(f"memories/user/u1/{key}/{new_id().hex}.json")
    pointer_id = new_id()
    if stored == b"":
        where.adapter.put(path, seal_for(world.runtime, world.tenant_id, path, pointer_id,
                                         ("user", "u1"), data))
    elif stored is not None:
        where.adapter.put(path, stored)
    row = MemoryPointer(
        id=pointer_id, tenant_id=world.tenant_id, scope_type="user", scope_ref="u1", key=key,
        memory_type="fact", tags=[], importance=3, source="api",
        storage_config_id=where.config_id, storage_path=path,
        content_sha256=hashlib.sha256(data).hexdigest(), content_size=len(data),
        sync_status=status, version=1, has_embeddings=False,
        created_at=updated or utcnow(), updated_at=updated or utcnow())
    with world.runtime.sessions() as session:
        session.add(row)
        session.commit()
        session.refresh(row)
        session.expunge(row)
    return row


def sealed(world: ServiceWorld, where: Target, path: str, pointer_id: uuid.UUID,
           content: bytes) -> bytes:
    return seal_for(world.runtime, world.tenant_id, path, pointer_id, ("user", "u1"), content)


def statuses(world: ServiceWorld) -> dict[str, str]:
    """key -> sync status of the tenant's pointers."""
    with world.runtime.sessions() as session:
        return dict(session.execute(select(MemoryPointer.key, MemoryPointer.sync_status).where(
            MemoryPointer.tenant_id == world.tenant_id)).all())  # type: ignore[arg-type]


def audit_rows(world: ServiceWorld, *operations: str
               ) -> list[tuple[str, str, str, uuid.UUID | None, str]]:
    """(operation, accessor type, accessor id, pointer id, detail) in order."""
    with world.runtime.sessions() as session:
        return [tuple(r) for r in session.execute(  # type: ignore[misc]
            select(AccessLog.operation, AccessLog.accessor_type, AccessLog.accessor_id,
                   AccessLog.pointer_id, AccessLog.detail)
            .where(AccessLog.tenant_id == world.tenant_id,
                   AccessLog.operation.in_(operations))
            .order_by(AccessLog.id)).all()]


def candidates(world: ServiceWorld) -> dict[str, bool]:
    """GC candidate path -> whether it is a tombstone (swept)."""
    with world.runtime.sessions() as session:
        return {path: swept is not None for path, swept in session.execute(
            select(GcCandidate.path, GcCandidate.swept_at)
            .where(GcCandidate.tenant_id == world.tenant_id)).all()}


def other_world(world: ServiceWorld) -> ServiceWorld:
    """A second tenant on the same runtime."""
    with world.runtime.sessions() as session:
        created, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    return ServiceWorld(world.runtime, created.id)


def local_config(world: ServiceWorld, root: Path) -> uuid.UUID:
    """Another (inactive) local bucket of the tenant's, as a reconfiguration leaves one."""
    config = StorageConfig(tenant_id=world.tenant_id, storage_type="local",
                           connection_config={"root": str(root)}, prefix="mp",
                           is_active=False, created_at=utcnow() - HOUR)
    with world.runtime.sessions() as session:
        session.add(config)
        session.commit()
        return config.id

def checkpoint_left_unrecorded(world: ServiceWorld) -> int:
    """A checkpoint put into the bucket whose record a crash lost (the claim committed, the
    checkpoint put, the head's record of it set back); returns the sequence it anchored."""
    runtime = world.runtime
    with runtime.sessions() as session:
        memories.set_value(session, runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.agent, "cp", "k"), "v", MemoryMeta())
    with runtime.sessions() as session:
        audit.seal(session, world.tenant_id)
        assert checkpoints.anchor(session, runtime.plane, runtime.settings, world.tenant_id,
                                  seal=audit.seal)
        seq = session.get(AuditHead, world.tenant_id).anchored_seq  # type: ignore[union-attr]
        session.execute(update(AuditHead).where(AuditHead.tenant_id == world.tenant_id)
                        .values(anchored_seq=0, anchored_at=None, anchor_config_id=None))
        session.commit()
    return int(seq)
