"""Export archives on cloud buckets stream both ways: on S3 (moto), GCS (fake-gcs-server) and
Azure (Azurite) an archive larger than the adapter's part size is uploaded in parts (multipart,
resumable chunks, staged blocks) and downloaded in chunks — the whole-object ``put``/``get``
are never used for it — and what the download serves is the ZIP whose SHA-256 and size the
job recorded; an archive replaced in the bucket is refused (409) with nothing served. On
SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import export_download
from control_plane.compliance import service as compliance
from control_plane.db.models import AccessLog, Job
from control_plane.errors import HashMismatch
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from tests.support.emulators import Azurite, FakeGcsServer, MotoServer
from tests.support.service import isolated_database, make_settings

SUBJECT = "subject-s"
S3_PART, SMALL_PART = 5 << 20, 256 << 10


def _bucket_url(request: pytest.FixtureRequest, backend: str) -> tuple[str, int]:
    """A fresh bucket on ``backend``'s emulator as a default-bucket URL, and the part size
    the test gives its adapter."""
    if backend == "s3":
        server: Any = request.getfixturevalue("moto_server")
        assert isinstance(server, MotoServer)
        config = server.config(f"exp-{uuid.uuid4().hex[:12]}")
        server.create_bucket(config["bucket"])
        return f"s3://{config.pop('bucket')}?{urlencode(config)}", S3_PART
    if backend == "gcs":
        server = request.getfixturevalue("gcs_server")
        assert isinstance(server, FakeGcsServer)
        config = server.config(f"exp-{uuid.uuid4().hex[:12]}")
        server.create_bucket(config["bucket"])
        return f"gs://{config.pop('bucket')}?{urlencode(config)}", SMALL_PART
    server = request.getfixturevalue("azurite_server")
    assert isinstance(server, Azurite)
    config = server.config(f"exp-{uuid.uuid4().hex[:12]}")
    server.create_bucket(config["container"])
    return f"az://{config.pop('container')}?{urlencode(config)}", SMALL_PART


@pytest.fixture(params=["s3", "gcs", "azure"])
def cloud(request: pytest.FixtureRequest, database: str,
          tmp_path: Path) -> Iterator[tuple[Runtime, int]]:
    url, part = _bucket_url(request, request.param)
    runtime = Runtime(make_settings(isolated_database(database, request), tmp_path,
                                    default_bucket_url=url))
    if database == "sqlite":
        runtime.migrate()
    adapter: Any = runtime.plane.default_adapter
    getattr(adapter, "inner", adapter).part_size = part  # under the metrics wrapper, if any
    try:
        yield runtime, part
    finally:
        runtime.close()


def _whole_object_calls_refused(adapter: Any) -> None:
    """The archive must never go through the whole-object put/get."""
    put, get = adapter.put, adapter.get

    def guarded_put(path: str, data: bytes) -> None:
        assert "/exports/" not in path, "the archive was put whole"
        put(path, data)

    def guarded_get(path: str, max_bytes: int | None = None) -> bytes:
        assert "/exports/" not in path, "the archive was read whole"
        return bytes(get(path, max_bytes))

    adapter.put, adapter.get = guarded_put, guarded_get


def _export(runtime: Runtime, part: int) -> tuple[Actor, uuid.UUID, dict[str, Any],
                                                   dict[str, Any]]:
    with runtime.sessions() as session:
        tenant, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    actor = Actor(tenant.id, "api", "test")
    # Random hex compresses to about half: the archive is some 2.5 parts.
    per_value = part * 5 // 8
    written: dict[str, Any] = {}
    with runtime.sessions() as session:
        for i in range(8):
            value = {"i": i, "text": os.urandom(per_value // 2).hex()}
            pointer = memories.set_value(session, runtime.plane, actor,
                                         MemoryAddress.parse(Scope.user, SUBJECT, f"k{i}"),
                                         value, MemoryMeta())
            written[str(pointer.id)] = value  # type: ignore[union-attr]
        job = compliance.start_export(session, actor, SUBJECT, "json")
    adapter: Any = runtime.plane.default_adapter
    _whole_object_calls_refused(adapter)
    adapter.stats.reset()
    assert JobWorker(runtime.sessions, runtime.plane, runtime.settings).run_once() == job.id
    with runtime.sessions() as session:
        done = session.get(Job, job.id)
        assert done is not None and done.state == "completed", done and done.error
        result = dict(done.result or {})
    return actor, job.id, result, written


def test_an_archive_of_several_parts_uploads_and_downloads_streamed_and_verified(
        cloud: tuple[Runtime, int]) -> None:
    runtime, part = cloud
    actor, job_id, result, written = _export(runtime, part)
    adapter: Any = runtime.plane.default_adapter
    assert result["size"] > 2 * part and result["encrypted"] is True
    counts = adapter.stats.counts
    if adapter.scheme == "s3":
        assert counts["put_part"] >= 3 and counts["put_complete"] == 1
    elif adapter.scheme == "az":
        assert counts["put_block"] >= 3 and counts["put_commit"] == 1
    else:
        assert counts["put"] >= 4  # a resumable session, then a request per chunk

    adapter.stats.reset()
    with runtime.sessions() as session:
        chunks, size = export_download.download(session, runtime.plane, actor, job_id)
        served = list(chunks)
    assert adapter.stats.counts["get"] >= 1
    body = b"".join(served)
    assert max(len(c) for c in served) <= 1 << 20
    assert (size, len(body)) == (result["size"], result["size"])
    assert hashlib.sha256(body).hexdigest() == result["sha256"]
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        items = {item["pointer_id"]: item for item in manifest["items"]}
        assert set(items) == set(written)
        for pointer_id, value in written.items():
            assert items[pointer_id]["hash_verified"] is True
            assert json.loads(archive.read(items[pointer_id]["file"])) == value
    with runtime.sessions() as session:
        rows = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == actor.tenant_id,
            AccessLog.operation == "export_download")).all()
    assert rows == [f"job {job_id}: {result['size']} bytes, sha256 verified"]


def test_an_archive_replaced_in_the_bucket_is_refused_and_nothing_is_served(
        cloud: tuple[Runtime, int]) -> None:
    runtime, part = cloud
    actor, job_id, result, _ = _export(runtime, part)
    adapter: Any = runtime.plane.default_adapter
    path = result["archive_path"]
    adapter.delete_many([path])
    # Other bytes of about the archive's size, in several parts: the streamed check refuses.
    adapter.put_file(path, io.BytesIO(os.urandom(result["size"] + 64)))
    with runtime.sessions() as session, pytest.raises(HashMismatch):
        export_download.download(session, runtime.plane, actor, job_id)
    with runtime.sessions() as session:
        failed = session.scalars(select(AccessLog.success).where(
            AccessLog.tenant_id == actor.tenant_id,
            AccessLog.operation == "export_download")).all()
    assert failed == [False]
