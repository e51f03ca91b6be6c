"""A versioned S3 bucket keeps every version and adds delete markers: deleting a memory, and
overwriting one, must still leave nothing of the old object behind (checked with raw
``list_object_versions``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update

import memplane
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer
from control_plane.integrity.reconcile import reconcile
from tests.support.buckets import S3Bucket
from tests.support.emulators import MotoServer
from tests.support.service import Tenant


@pytest.fixture
def versioned(moto_server: MotoServer) -> Iterator[S3Bucket]:
    bucket = S3Bucket(moto_server, versioned=True)
    yield bucket
    bucket.close()


@pytest.fixture
def client(tenant: Tenant, versioned: S3Bucket) -> Iterator[memplane.Client]:
    with tenant.client() as client:
        config = client.storage.configure(storage_type="s3",
                                          connection_config=versioned.connection_config)
        assert config.versioning is True
        yield client


def test_overwrite_and_delete_leave_no_version_and_no_marker(
        client: memplane.Client, versioned: S3Bucket, tenant: Tenant) -> None:
    prefix = f"memplane/{tenant.id}/"
    first = client.memory.set(scope="user", scope_ref="u1", key="k", value=1)
    second = client.memory.set(scope="user", scope_ref="u1", key="k", value=2)
    assert versioned.versions(prefix) == ([prefix + second.storage_path], [])
    assert first.storage_path != second.storage_path

    client.memory.append(scope="user", scope_ref="u1", key="log", value="a")
    log = client.memory.append(scope="user", scope_ref="u1", key="log", value="b")
    assert versioned.versions(prefix) == (
        sorted([prefix + second.storage_path, prefix + log.storage_path]), [])

    client.memory.delete(scope="user", scope_ref="u1", key="k")
    assert versioned.versions(prefix) == ([prefix + log.storage_path], [])
    assert client.memory.clear(scope="user", scope_ref="u1") == 1
    # Nothing at all: no version, no delete marker, not even of the health probes.
    assert versioned.versions("") == ([], [])


def test_the_reconciler_purges_versions_of_a_pending_delete(
        client: memplane.Client, versioned: S3Bucket, tenant: Tenant) -> None:
    pointer = client.memory.set(scope="agent", scope_ref="a1", key="k", value="v")
    # As a crash after "mark pending_delete" leaves it.
    with tenant.stack.engine.begin() as conn:
        conn.execute(update(MemoryPointer).where(MemoryPointer.tenant_id == tenant.id).values(
            sync_status="pending_delete", updated_at=utcnow() - timedelta(hours=1)))
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        report = reconcile(session, runtime.plane, grace_seconds=60, tenant_id=tenant.id)
    assert report.deletes_completed == 1
    assert versioned.versions("") == ([], [])
    with pytest.raises(memplane.NotFound):
        client.memory.get(scope="agent", scope_ref="a1", key="k")
    assert pointer.id not in [p.id for p in client.memory.list_pointers().items]


def test_an_unversioned_bucket_reports_so(tenant: Tenant, moto_server: MotoServer) -> None:
    plain = S3Bucket(moto_server)
    try:
        with tenant.client() as client:
            config = client.storage.configure(storage_type="s3",
                                              connection_config=plain.connection_config)
            client.memory.set(scope="user", scope_ref="u", key="k", value=1)
            client.memory.delete(scope="user", scope_ref="u", key="k")
        assert config.versioning is False
        assert plain.versions("") == ([], [])
    finally:
        plain.close()
