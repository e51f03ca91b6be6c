"""The archive tier on a tenant's own bucket on every backend, through a live server: the
object's class as the backend's raw client reports it, the pointer's class, and a verified
read through the SDK afterwards. fake-gcs-server ignores the class of a rewrite, so on GCS
the run reports the item as failed and the pointer keeps claiming nothing (see
tests/storage_adapters/test_storage_classes.py for what each emulator keeps)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import delete, insert, update

from control_plane.archive import service as archive
from control_plane.db.models import MemoryPointer, SubjectErasure
from tests.support.buckets import RawBucket, S3Bucket
from tests.support.service import Tenant

BACKENDS = ["local", "s3", "s3-versioned", "gcs", "azure"]
# What the backend reports after "archive": None where the emulator keeps its default.
ARCHIVED = {"local": "archive", "s3": "STANDARD_IA", "s3-versioned": "STANDARD_IA",
            "gcs": None, "azure": "Cool"}
DEFAULT = {"local": "standard", "s3": "STANDARD", "s3-versioned": "STANDARD",
           "gcs": "STANDARD", "azure": "Hot"}


def raw_class(bucket: RawBucket, key: str) -> str:
    """The object's class as the backend's own client reports it."""
    if bucket.name == "local":  # recorded beside the tenant's tree (storage_adapters/localclasses)
        prefix, tenant_id, path = key.split("/", 2)
        record = bucket.root / prefix / tenant_id / ".memplane-class" / path  # type: ignore[attr-defined]
        return record.read_text() if record.exists() else "standard"
    if bucket.name == "s3":
        found = bucket.raw.head_object(Bucket=bucket.bucket, Key=key)  # type: ignore[attr-defined]
        return str(found.get("StorageClass", "STANDARD"))
    if bucket.name == "gcs":
        blob = bucket.raw.bucket(bucket.bucket).get_blob(key)  # type: ignore[attr-defined]
        return str(blob.storage_class)
    props = bucket.raw.get_blob_client(key).get_blob_properties()  # type: ignore[attr-defined]
    return str(props.blob_tier)


def _report(tenant: Tenant, pointer_ids: list[str]) -> archive.ArchiveReport:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        return archive.archive(session, runtime.plane, tenant.id,
                               pointer_ids=[uuid.UUID(i) for i in pointer_ids])


@pytest.mark.parametrize("raw_bucket", BACKENDS, indirect=True)
def test_archive_on_each_backend_then_a_verified_read(
        raw_bucket: RawBucket, request: pytest.FixtureRequest, tenant: Tenant) -> None:
    backend = request.node.callspec.params["raw_bucket"]
    with tenant.client() as client:
        client.storage.configure(storage_type=raw_bucket.name,
                                 connection_config=raw_bucket.connection_config)
        written = client.memory.set(scope="user", scope_ref="u-1", key="prefs",
                                    value={"tone": "brief"})
        key = f"memplane/{tenant.id}/{written.storage_path}"
        assert raw_class(raw_bucket, key) == DEFAULT[backend]

        report = _report(tenant, [written.id])

        expected = ARCHIVED[backend]
        read = client.memory.get(scope="user", scope_ref="u-1", key="prefs")
        assert read.value == {"tone": "brief"}  # hash-verified by the service (I3)
        if expected is None:  # the emulator kept the object where it was
            assert (report.archived, report.failed) == (0, 1)
            assert raw_class(raw_bucket, key) == DEFAULT[backend]
            assert read.pointer.storage_class is None
            failures = client.audit.list(operation="archive").items
            assert [(e.success, e.detail) for e in failures] == [
                (False, "pointer not archived: store_refused")]
        else:
            assert (report.archived, report.failed) == (1, 0)
            assert raw_class(raw_bucket, key) == expected
            assert read.pointer.storage_class == expected
            assert [p.storage_class for p in client.memory.list_pointers().items] == [expected]
        if isinstance(raw_bucket, S3Bucket):
            assert raw_bucket.versions(f"memplane/{tenant.id}/memories/") == ([key], [])
        assert raw_bucket.keys(f"memplane/{tenant.id}/memories/") == [key]

        client.memory.delete(scope="user", scope_ref="u-1", key="prefs")
        assert raw_bucket.keys(f"memplane/{tenant.id}/memories/") == []
        if isinstance(raw_bucket, S3Bucket):
            assert raw_bucket.versions(f"memplane/{tenant.id}/memories/") == ([], [])


def test_a_memorys_vector_object_moves_with_it(tenant: Tenant) -> None:
    with tenant.client() as client:
        written = client.memory.set(scope="agent", scope_ref="a-1", key="k", value="v")
    adapter = tenant.stack.runtime.plane.default_adapter
    vector = f"tenants/{tenant.id}/vectors/{written.id}.bin"
    adapter.put(vector, b"\x00" * 64)
    with tenant.stack.engine.begin() as conn:
        conn.execute(update(MemoryPointer).where(MemoryPointer.id == uuid.UUID(written.id))
                     .values(has_embeddings=True, embedding_storage_path=vector))

    report = _report(tenant, [written.id])

    assert report.archived == 1
    assert adapter.head(vector).storage_class == "archive"
    assert adapter.head(str(written.storage_path)).storage_class == "archive"


def test_a_subject_being_erased_is_left_alone(tenant: Tenant) -> None:
    with tenant.client() as client:
        written = client.memory.set(scope="user", scope_ref="u-9", key="k", value="v")
    with tenant.stack.engine.begin() as conn:
        conn.execute(insert(SubjectErasure).values(
            tenant_id=tenant.id, user_id="u-9", job_id=uuid.uuid4()))
    try:
        report = _report(tenant, [written.id])
    finally:
        with tenant.stack.engine.begin() as conn:
            conn.execute(delete(SubjectErasure).where(SubjectErasure.tenant_id == tenant.id))
    assert (report.archived, report.not_found) == (0, 1)
    adapter = tenant.stack.runtime.plane.default_adapter
    assert adapter.head(str(written.storage_path)).storage_class == "standard"
