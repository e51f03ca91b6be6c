"""Export archives are objects like any other (DESIGN §11): sealed under the data subject's
key, hash-checked on download, deleted after ``MEMPLANE_EXPORT_TTL_HOURS``; and a second
export request for a subject returns the one already queued or running.

The server here runs without its in-process job worker, on a database of its own: each test
runs the worker itself (``JobWorker.run_once``, ``JobWorker.expire_exports`` with a chosen clock),
so nothing races and nothing sleeps. The bucket is the server's local default bucket, read
and tampered with straight from its directory, never through the service.
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

import memplane
from control_plane.compliance import export_download
from control_plane.db.engine import begin_write, make_engine, make_session_factory
from control_plane.db.migrate import upgrade
from control_plane.db.models import AccessLog, Job
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from storage_adapters.envelope import MAGIC, DecryptionError
from tests.support.service import ServerThread, Stack, Tenant, isolated_database, make_settings

SUBJECT = "user-ana@example.com"


@pytest.fixture(scope="module")
def quiet(database: str, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server without its own job worker, on a database no other server's worker sees."""
    url = isolated_database(database, request)
    settings = make_settings(url, tmp_path_factory.mktemp("exports"), run_jobs=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


@pytest.fixture
def tenant(quiet: Stack) -> Tenant:
    return quiet.new_tenant()


def _worker(stack: Stack, clock: datetime | None = None) -> JobWorker:
    if clock is None:
        return JobWorker(stack.runtime.sessions, stack.runtime.plane, stack.runtime.settings)
    return JobWorker(stack.runtime.sessions, stack.runtime.plane, stack.runtime.settings,
                     clock=lambda: clock)


def _write(tenant: Tenant, user: str, n: int) -> dict[str, str]:
    """``n`` memories of ``user``, each holding a unique marker; returns {pointer id: marker}."""
    written = {}
    with tenant.client() as client:
        for i in range(n):
            marker = f"needle-{uuid.uuid4().hex}"
            scope: dict[str, Any] = ({"scope": "user", "scope_ref": user} if i % 2 == 0 else
                     {"scope": "agent", "scope_ref": "support-bot", "user_id": user})
            pointer = client.memory.set(key=f"k{i}", value={"note": marker}, **scope)
            written[pointer.id] = marker
    return written


def _export(tenant: Tenant, user: str = SUBJECT) -> memplane.Job:
    """Start an export, run it with a worker of the test's own, return the finished job."""
    with tenant.client() as client:
        job = client.memory.export(user_id=user)
        assert _worker(tenant.stack).run_once() == uuid.UUID(job.id)
        done = client.jobs.get(job.id)
    assert done.state == "completed", done.error
    return done


def _archive(tenant: Tenant, job_id: str) -> Path:
    return tenant.bucket_dir / "exports" / job_id / "export.zip"


def _audit_rows(stack: Stack, tenant: Tenant, operation: str) -> list[AccessLog]:
    with stack.runtime.sessions() as session:
        return list(session.scalars(
            select(AccessLog).where(AccessLog.tenant_id == tenant.id,
                                    AccessLog.operation == operation)
            .order_by(AccessLog.accessed_at)))


def test_the_archive_in_the_bucket_is_sealed_and_the_download_is_the_verified_zip(
        tenant: Tenant, tmp_path: Path) -> None:
    markers = _write(tenant, SUBJECT, 6)
    done = _export(tenant)

    raw = _archive(tenant, done.id).read_bytes()
    assert not raw.startswith(b"PK")
    assert raw[:4] == MAGIC
    assert not zipfile.is_zipfile(io.BytesIO(raw))
    for marker in markers.values():
        assert marker.encode() not in raw
    assert SUBJECT.encode() not in raw

    assert done.result is not None
    assert done.result["encrypted"] is True
    expires = datetime.fromisoformat(done.result["expires_at"])
    finished = datetime.fromisoformat((done.model_extra or {})["updated_at"])
    assert timedelta(hours=71, minutes=59) < expires - finished <= timedelta(hours=72)
    with tenant.client() as client:
        size = client.exports.download(done.id, tmp_path / "export.zip")
    data = (tmp_path / "export.zip").read_bytes()
    assert size == len(data) == done.result["size"]
    assert hashlib.sha256(data).hexdigest() == done.result["sha256"]
    with zipfile.ZipFile(tmp_path / "export.zip") as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert manifest["user_id"] == SUBJECT
        assert {item["pointer_id"]: json.loads(archive.read(item["file"]))["note"]
                for item in manifest["items"]} == markers


def test_a_copy_of_the_archive_no_longer_decrypts_once_the_subject_is_erased(
        tenant: Tenant, tmp_path: Path) -> None:
    _write(tenant, SUBJECT, 4)
    done = _export(tenant)
    copy = _archive(tenant, done.id).read_bytes()  # what a backup or old version would keep
    assert done.result is not None
    archive_path = done.result["archive_path"]
    runtime = tenant.stack.runtime

    def try_open() -> bytes:
        out = io.BytesIO()
        with runtime.sessions() as session:
            export_download.open_archive(session, runtime.plane, tenant.id, archive_path,
                                         uuid.UUID(done.id), io.BytesIO(copy), out, sealed=True)
        return out.getvalue()

    assert zipfile.is_zipfile(io.BytesIO(try_open()))  # the right key opens it

    with tenant.client() as client:
        erase = client.memory.erase_user(SUBJECT)
        assert _worker(tenant.stack).run_once() == uuid.UUID(erase.id)
        assert client.jobs.get(erase.id).state == "completed"
        with pytest.raises(memplane.NotFound):
            client.exports.download(done.id, tmp_path / "after.zip")

    assert not _archive(tenant, done.id).exists()
    assert not zipfile.is_zipfile(io.BytesIO(copy))
    with pytest.raises(DecryptionError, match="destroyed"):
        try_open()


@pytest.mark.parametrize("tamper", ["flip_byte", "plain_zip", "other_export", "truncate"])
def test_a_tampered_archive_is_refused_with_409_and_nothing_is_served(
        tenant: Tenant, tmp_path: Path, tamper: str) -> None:
    _write(tenant, SUBJECT, 3)
    done = _export(tenant)
    path = _archive(tenant, done.id)
    raw = path.read_bytes()
    if tamper == "flip_byte":
        stored = raw[:200] + bytes([raw[200] ^ 1]) + raw[201:]
    elif tamper == "plain_zip":  # a ZIP of someone's choosing in place of the sealed one
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as forged:
            forged.writestr("manifest.json", json.dumps({"user_id": SUBJECT, "items": []}))
        stored = buffer.getvalue()
    elif tamper == "other_export":  # a genuine archive of the same subject, another job
        stored = _archive(tenant, _export(tenant).id).read_bytes()
    else:
        stored = raw[:-100]
    path.write_bytes(stored)

    out = tmp_path / "export.zip"
    with tenant.client() as client, pytest.raises(memplane.HashMismatch) as caught:
        client.exports.download(done.id, out)
    assert caught.value.status_code == 409
    assert caught.value.code == "hash_mismatch"
    assert caught.value.detail is not None and "nothing was served" in caught.value.detail
    assert not out.exists()
    assert not (tmp_path / "export.zip.part").exists()
    failed = [row for row in _audit_rows(tenant.stack, tenant, "export_download")
              if not row.success]
    assert len(failed) == 1 and "hash_mismatch" in failed[0].detail


def test_an_expired_archive_is_deleted_audited_and_its_download_answers_410(
        tenant: Tenant, tmp_path: Path) -> None:
    _write(tenant, SUBJECT, 2)
    done = _export(tenant)
    assert done.result is not None
    expires = datetime.fromisoformat(done.result["expires_at"])
    path = _archive(tenant, done.id)

    # a minute before its time nothing happens (other tests' older exports may go)
    _worker(tenant.stack, expires - timedelta(minutes=1)).expire_exports()
    assert path.exists()
    assert _audit_rows(tenant.stack, tenant, "export_expire") == []
    with tenant.client() as client:
        client.exports.download(done.id, tmp_path / "before.zip")

    assert _worker(tenant.stack, expires + timedelta(seconds=1)).expire_exports() >= 1
    assert not path.exists()
    _worker(tenant.stack, expires + timedelta(seconds=2)).expire_exports()  # done only once
    rows = _audit_rows(tenant.stack, tenant, "export_expire")
    assert [(row.accessor_type, row.accessor_id, row.success) for row in rows] == [
        ("system", "export-expiry", True)]
    assert done.id in rows[0].detail and "archive deleted from the bucket" in rows[0].detail

    with tenant.client() as client:
        job = client.jobs.get(done.id)
        assert job.result is not None
        assert job.result["expired_at"] == (expires + timedelta(seconds=1)).isoformat()
        with pytest.raises(memplane.APIError) as caught:
            client.exports.download(done.id, tmp_path / "after.zip")
    assert caught.value.status_code == 410
    assert caught.value.code == "export_expired"
    assert caught.value.detail == (
        f"this export expired at {expires.isoformat()} and its archive was deleted from the "
        "bucket; start a new one (POST /v1/subjects/{user_id}/export)")
    assert not (tmp_path / "after.zip").exists()


def test_a_download_after_the_expiry_answers_410_before_the_worker_has_swept(
        tenant: Tenant) -> None:
    _write(tenant, SUBJECT, 1)
    done = _export(tenant)
    assert done.result is not None
    expires = datetime.fromisoformat(done.result["expires_at"])
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        with pytest.raises(export_download.ExportExpired) as caught:
            export_download.download(session, runtime.plane, Actor(tenant.id, "api", "test"),
                                     uuid.UUID(done.id), now=expires)
    assert caught.value.status_code == 410
    assert _archive(tenant, done.id).exists()  # still there until the worker's sweep


def test_a_second_export_of_a_subject_returns_the_job_already_queued_or_running(
        tenant: Tenant) -> None:
    _write(tenant, SUBJECT, 1)
    with tenant.client() as client, tenant.stack.http(tenant.admin_key) as http:
        first = http.post(f"/v1/subjects/{SUBJECT}/export")
        second = http.post(f"/v1/subjects/{SUBJECT}/export", json={"format": "json"})
        assert (first.status_code, second.status_code) == (202, 202)
        assert second.json()["id"] == first.json()["id"]
        assert second.json()["state"] == "queued"
        other = client.memory.export(user_id="user-ben")  # another subject: a job of its own
        assert other.id != first.json()["id"]

        worker = _worker(tenant.stack)
        claimed = worker.claim()  # running now, not finished
        assert claimed is not None and str(claimed.id) == first.json()["id"]
        third = client.memory.export(user_id=SUBJECT)
        assert (third.id, third.state) == (first.json()["id"], "running")

    with tenant.stack.runtime.sessions() as session:
        # A write transaction from its first read: the server's background writers (audit
        # sealer, indexer) commit meanwhile, and SQLite cannot turn a stale read into a write.
        begin_write(session)
        jobs = session.scalars(select(Job).where(Job.tenant_id == tenant.id,
                                                 Job.kind == "export")).all()
        assert sorted(j.subject or "" for j in jobs) == [SUBJECT, "user-ben"]
        for job in jobs:  # leave nothing runnable behind for the next test
            job.state = "failed"
        session.commit()

    with tenant.client() as client:
        # once finished, a new request is a new export
        fresh = client.memory.export(user_id=SUBJECT)
        assert fresh.id != first.json()["id"] and fresh.state == "queued"


def test_a_queued_dry_run_does_not_block_an_export_but_a_queued_erasure_does(
        tenant: Tenant) -> None:
    """A dry run deletes nothing, so the subject's data is still there to export; a real
    erasure would leave nothing, so the export is refused while one is queued."""
    _write(tenant, "user-cy", 1)
    with tenant.client() as client, tenant.stack.http(tenant.admin_key) as http:
        plan = client.memory.erase_user("user-cy", dry_run=True)
        assert plan.state == "queued"
        export = http.post("/v1/subjects/user-cy/export")
        assert export.status_code == 202, export.text
        assert export.json()["state"] == "queued" and export.json()["id"] != plan.id

        erasure = client.memory.erase_user("user-dee")
        assert erasure.state == "queued"
        refused = http.post("/v1/subjects/user-dee/export")
        assert refused.status_code == 409
        assert refused.json()["detail"] == ("an erasure of this subject is queued or running; "
                                            "an export would find nothing to export")
    with tenant.stack.runtime.sessions() as session:
        begin_write(session)
        for job in session.scalars(select(Job).where(Job.tenant_id == tenant.id)).all():
            job.state = "failed"  # leave nothing runnable behind for the next test
        session.commit()


def test_the_cli_downloads_a_finished_export_and_says_clearly_when_it_expired(
        tenant: Tenant, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memplane.cli import app

    _write(tenant, SUBJECT, 2)
    done = _export(tenant)
    assert done.result is not None
    env = {"MEMPLANE_URL": tenant.stack.base_url, "MEMPLANE_API_KEY": tenant.admin_key}
    out = tmp_path / "again.zip"

    ok = CliRunner().invoke(app, ["export", SUBJECT, "--job", done.id, "--out", str(out)],
                            env=env)
    assert ok.exit_code == 0, ok.output
    assert hashlib.sha256(out.read_bytes()).hexdigest() == done.result["sha256"]
    assert f"the archive stays in the bucket until {done.result['expires_at']}" in ok.output

    expires = datetime.fromisoformat(done.result["expires_at"])
    _worker(tenant.stack, expires + timedelta(seconds=1)).expire_exports()
    gone = CliRunner().invoke(app, ["export", SUBJECT, "--job", done.id, "--out",
                                    str(tmp_path / "late.zip")], env=env)
    assert gone.exit_code == 1
    text = " ".join(gone.output.split())
    assert f"export job {done.id} has expired: this export expired at " \
           f"{expires.isoformat()}" in text
    assert "start a new one" in text and f"run `memplane export {SUBJECT} --out" in text
    assert not (tmp_path / "late.zip").exists()


def test_exports_finished_before_the_upgrade_get_the_default_lifetime(
        database: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    import sqlalchemy as sa

    if database == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = request.getfixturevalue("postgres").create_database()
    engine = make_engine(url)
    try:
        upgrade(engine, "0004")  # the jobs table as it was, without expiry
        tenants = sa.table("tenants", sa.column("id", sa.Uuid()), sa.column("name", sa.String()),
                           sa.column("created_at", sa.DateTime(timezone=True)))
        jobs = sa.table("jobs", sa.column("id", sa.Uuid()), sa.column("tenant_id", sa.Uuid()),
            *(sa.column(name, sa.String()) for name in ("kind", "state")),
            *(sa.column(name, sa.JSON()) for name in ("params", "progress", "result")),
            sa.column("attempts", sa.Integer()),
            sa.column("created_at", sa.DateTime(timezone=True)),
            sa.column("updated_at", sa.DateTime(timezone=True)))
        finished = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
        tenant_id, done, queued = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        with engine.begin() as connection:
            connection.execute(tenants.insert().values(id=tenant_id, name="old",
                                                       created_at=finished))
            for job_id, state in ((done, "completed"), (queued, "queued")):
                connection.execute(jobs.insert().values(
                    id=job_id, tenant_id=tenant_id, kind="export", params={}, state=state,
                    progress={}, result={"archive_path": "x", "sha256": "0" * 64, "size": 1}
                    if state == "completed" else None, attempts=1,
                    created_at=finished, updated_at=finished))
        upgrade(engine)
        with make_session_factory(engine)() as session:
            expiry = {job.id: job.expires_at for job in session.scalars(select(Job))}
    finally:
        engine.dispose()
    assert expiry == {done: finished + timedelta(hours=72), queued: None}


@pytest.mark.databases("sqlite")
def test_the_streamed_envelope_is_the_same_format_as_the_whole_object_one(
        database: str) -> None:
    import os

    from storage_adapters import envelope

    key, key_id, context = envelope.new_key(), uuid.uuid4(), b"ctx"
    for size in (0, 1, 999, 1000, 4321):
        plain = os.urandom(size)
        sealed = io.BytesIO()
        envelope.seal_stream(io.BytesIO(plain), sealed, size, key_id=key_id, subject_key=key,
                             context=context, chunk_size=1000)
        assert envelope.open_sealed(sealed.getvalue(), subject_key=key,
                                    context=context) == plain
        whole = envelope.seal(plain, key_id=key_id, subject_key=key, context=context,
                              chunk_size=1000)
        for blob in (sealed.getvalue(), whole):
            src, out = io.BytesIO(blob), io.BytesIO()
            header = envelope.read_header(src.read(envelope.HEADER_BYTES))
            envelope.open_stream(src, out, header=header, subject_key=key, context=context)
            assert out.getvalue() == plain
        for broken, why in ((whole[:-1], "truncated"), (whole + b"x", "extended")):
            src = io.BytesIO(broken)
            header = envelope.read_header(src.read(envelope.HEADER_BYTES))
            with pytest.raises(DecryptionError, match=why):
                envelope.open_stream(src, io.BytesIO(), header=header, subject_key=key,
                                     context=context)
        src = io.BytesIO(whole)
        header = envelope.read_header(src.read(envelope.HEADER_BYTES))
        with pytest.raises(DecryptionError, match="failed authentication"):
            envelope.open_stream(src, io.BytesIO(), header=header, subject_key=key,
                                 context=b"another path")
    with pytest.raises(ValueError, match="ended 5 bytes early"):
        envelope.seal_stream(io.BytesIO(b"12345"), io.BytesIO(), 10, key_id=key_id,
                             subject_key=key, context=context)
