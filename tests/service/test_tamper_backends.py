"""Tampering on every backend (local, S3/moto, GCS/fake-gcs-server, Azure/Azurite): a flipped
byte, a truncated object, two objects swapped, a deleted object, an object sealed under
another tenant's key — each is refused with a clear integrity error, never content."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer, StorageConfig
from control_plane.errors import HashMismatch
from control_plane.integrity.service import verify_tenant
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.tenants.service import create_tenant
from tests.support.service import ServiceWorld

SECRET = "SECRET-" + uuid.uuid4().hex


@pytest.fixture(params=["local", "s3", "gcs", "azure"])
def bucket_world(request: pytest.FixtureRequest, world: ServiceWorld,
                 tmp_path: Path) -> Iterator[ServiceWorld]:
    """The world's tenant with its content in a bucket of the given backend."""
    backend: str = request.param
    config: dict[str, Any] = (
        {"root": str(tmp_path / "bucket")} if backend == "local"
        else request.getfixturevalue(f"{backend}_config"))
    with world.runtime.sessions() as session:
        session.add(StorageConfig(tenant_id=world.tenant_id, storage_type=backend,
                                  connection_config=config, prefix="mp",
                                  created_at=utcnow() + timedelta(seconds=1)))
        session.commit()
    world.runtime.plane.forget_tenant(world.tenant_id)
    yield world
    world.runtime.plane.forget_tenant(world.tenant_id)


def _address(key: str) -> MemoryAddress:
    return MemoryAddress.parse(Scope.user, "u1", key)


def _set(world: ServiceWorld, key: str, tenant_id: uuid.UUID | None = None) -> MemoryPointer:
    actor = world.actor if tenant_id is None else type(world.actor)(tenant_id, "api", "test")
    with world.runtime.sessions() as session:
        result = memories.set_value(session, world.runtime.plane, actor, _address(key),
                                    {"note": f"{SECRET} {key}"}, MemoryMeta())
    assert isinstance(result, MemoryPointer)
    return result


def test_every_kind_of_tampering_is_an_integrity_error(bucket_world: ServiceWorld) -> None:
    world = bucket_world
    plane = world.runtime.plane
    pointers = {k: _set(world, k) for k in
                ("intact", "flipped", "truncated", "swap-a", "swap-b", "deleted", "foreign")}
    with world.runtime.sessions() as session:
        other, _ = create_tenant(session, f"other-{uuid.uuid4().hex[:6]}")
    alien = _set(world, "foreign", tenant_id=other.id)
    with world.runtime.sessions() as session:
        target = plane.active(session, world.tenant_id)
        alien_target = plane.active(session, other.id)
    adapter = target.adapter
    assert target.config_id == pointers["intact"].storage_config_id
    blobs = {k: adapter.get(p.storage_path) for k, p in pointers.items()}
    assert all(SECRET.encode() not in blob for blob in blobs.values())

    def replace(key: str, data: bytes) -> None:
        path = pointers[key].storage_path
        adapter.delete_many([path])
        adapter.put(path, data)

    flipped = blobs["flipped"]
    replace("flipped", flipped[:100] + bytes([flipped[100] ^ 0x20]) + flipped[101:])
    replace("truncated", blobs["truncated"][:-7])
    replace("swap-a", blobs["swap-b"])
    replace("swap-b", blobs["swap-a"])
    adapter.delete_many([pointers["deleted"].storage_path])
    replace("foreign", alien_target.adapter.get(alien.storage_path))

    expected = {
        "flipped": "failed authentication",
        "truncated": "truncated or extended",
        "swap-a": "failed authentication",
        "swap-b": "failed authentication",
        "deleted": "is missing from the bucket",
        "foreign": "encrypted under a key this tenant does not have",
    }
    for key, reason in expected.items():
        with world.runtime.sessions() as session, pytest.raises(HashMismatch) as caught:
            memories.get_value(session, plane, world.actor, _address(key))
        error = caught.value
        assert (error.status_code, error.code) == (409, "hash_mismatch")
        assert reason in error.detail
        assert error.extra["actual_sha256"] is None
        assert error.extra["reason"] == ("missing" if key == "deleted" else "undecryptable")
        assert error.extra["pointer_id"] == str(pointers[key].id)
        assert SECRET not in str(error.body())
    with world.runtime.sessions() as session:
        value = memories.get_value(session, plane, world.actor, _address("intact")).value
        statuses = {p.key: p.sync_status for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id))}
        report = verify_tenant(session, plane, world.actor)
    assert value == {"note": f"{SECRET} intact"}
    assert statuses == {"intact": "synced", **{k: "corrupt" for k in expected}}
    assert (report.checked, report.ok, report.missing, report.corrupt) == (7, 1, 1, 5)
    assert (report.objects, report.orphaned) == (6, 0)
