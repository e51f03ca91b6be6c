"""SIGKILL of the process running an erasure or an export job, then a restart: the job is
taken over when its lease runs out and finishes; the erasure's receipt matches the bucket
(nothing of the subject left, counts equal to what was there); the export's archive is
complete and verifies; no temporary file holding the subject's bytes is left behind.

The kill lands at a chosen step: the process is started with a pause point
(``MEMPLANE_TEST_PAUSE_AT``, control_plane/testhooks.py) and killed once a job reached it.
The erasure runs in ``memplane serve`` (its job thread), the export in ``memplane worker``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import secrets
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from control_plane.compliance import export_download
from control_plane.db.models import Job, SubjectKey
from control_plane.memories.api import serialise
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from memplane._receipts import verify_receipt
from tests.support.postgres import PostgresCluster
from tests.support.process import ServerProcess, WorkerProcess, wait_for_pause

from .conftest import Deployment, make_env

pytestmark = pytest.mark.slow

SUBJECT = "alice@example.com"
OTHER = "bob"
LEASE_SECONDS = "2"


@pytest.fixture
def job_env(durable_postgres: PostgresCluster, tmp_path: Path) -> dict[str, str]:
    spool = tmp_path / "spool"
    spool.mkdir()
    return {**make_env(durable_postgres.create_database(), tmp_path),
            "MEMPLANE_JOB_LEASE_SECONDS": LEASE_SECONDS,
            "MEMPLANE_JOB_POLL_INTERVAL_SECONDS": "0.1",
            "MEMPLANE_RECEIPT_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
            # The children's temporary files (export spools) go here, where the test looks.
            "TMPDIR": str(spool),
            # One audit checkpoint, the first: a later one could be in flight (its temporary
            # file in the bucket) when a test kills the process for the job's sake.
            "MEMPLANE_AUDIT_CHECKPOINT_SECONDS": "3600"}


def _deployment(env: dict[str, str], tmp_path: Path) -> Iterator[Deployment]:
    server = ServerProcess(env).start()
    try:
        yield Deployment(env, server, tmp_path / "bucket")
    finally:
        server.stop()


@pytest.fixture
def serving(job_env: dict[str, str], tmp_path: Path) -> Iterator[Deployment]:
    """``memplane serve`` running jobs in its own thread (the embedded default)."""
    yield from _deployment(job_env, tmp_path)


@pytest.fixture
def api_only(job_env: dict[str, str], tmp_path: Path) -> Iterator[Deployment]:
    """``memplane serve`` without a job thread: ``memplane worker`` processes run the jobs."""
    yield from _deployment({**job_env, "MEMPLANE_RUN_JOBS": "false"}, tmp_path)


@pytest.fixture
def runtime(job_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name, value in job_env.items():
        monkeypatch.setenv(name, value)
    rt = Runtime(Settings())
    try:
        yield rt
    finally:
        rt.close()


def _seed(http: httpx.Client) -> dict[str, Any]:
    """The subject's memories in their own scope and in an agent's (tagged with their id),
    and another subject's, which must survive. Returns what was sent, by path."""
    sent: dict[str, Any] = {}
    for i in range(5):
        sent[f"user/{SUBJECT}/k{i}"] = {"note": f"alice {i}", "n": i}
    for i in range(3):
        sent[f"agent/helper/a{i}"] = [f"alice-agent {i}"]
    for i in range(2):
        sent[f"user/{OTHER}/k{i}"] = f"bob {i}"
    for path, value in sent.items():
        body: dict[str, Any] = {"value": value}
        if path.startswith("agent/"):
            body["user_id"] = SUBJECT
        response = http.put(f"/v1/memories/{path}", json=body)
        assert response.status_code == 200, response.text
    return sent


def _pointers(http: httpx.Client, **params: str) -> list[dict[str, Any]]:
    page = http.get("/v1/pointers", params={"limit": 1000, **params}).json()
    assert page["next_cursor"] is None
    items: list[dict[str, Any]] = page["items"]
    return items


def _wait_job(http: httpx.Client, job_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("completed", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def _files(root: Path) -> set[str]:
    """The bucket's files, less the audit checkpoints the server anchors on its own clock
    and the temporary file of a put in flight at that moment."""
    return {path for p in root.rglob("*") if p.is_file()
            if "/audit/checkpoints/" not in (path := p.relative_to(root).as_posix())
            and not path.startswith(".memplane-tmp/")}


def _no_temporaries(env: dict[str, str], bucket: Path) -> None:
    assert sorted(Path(env["TMPDIR"]).iterdir()) == []
    tmp = bucket / ".memplane-tmp"
    assert not tmp.exists() or sorted(tmp.iterdir()) == []


def _takeovers(http: httpx.Client, job_id: str) -> int:
    rows = http.get("/v1/audit", params={"operation": "job_takeover", "limit": 100}).json()
    return sum(1 for row in rows["items"] if job_id in (row["detail"] or ""))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("step", ["after_mark", "after_objects", "after_sweep",
                                  "before_receipt"])
def test_erasure_killed_mid_job_finishes_after_restart(serving: Deployment, runtime: Runtime,
                                                       tmp_path: Path, step: str) -> None:
    server, bucket = serving.server, serving.bucket_root
    with serving.http() as http:
        sent = _seed(http)
        subject_pointers = _pointers(http, user_id=SUBJECT)
        other_pointers = _pointers(http, user_id=OTHER)
        started = http.post(f"/v1/subjects/{SUBJECT}/export", json={"format": "json"})
        exported = _wait_job(http, started.json()["id"])
        assert exported["state"] == "completed", exported
    assert len(subject_pointers) == 8 and len(other_pointers) == 2
    subject_paths = {p["storage_path"] for p in subject_pointers}
    archive = exported["result"]["archive_path"]
    before = _files(bucket)
    assert subject_paths | {archive} <= before

    server.stop()  # a polite restart, to start again with the pause point
    pause = tmp_path / "pause"
    server.start(pause_at=f"erase:{step}", pause_file=pause)
    with serving.http() as http:
        response = http.post(f"/v1/subjects/{SUBJECT}/erase", json={})
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
    wait_for_pause(pause, server.process)
    server.kill()
    _no_temporaries(serving.env, bucket)
    server.start()

    with serving.http() as http:
        job = _wait_job(http, job_id)
        assert job["state"] == "completed", job
        assert _takeovers(http, job_id) == 1  # the kill landed mid-job; a restart took over
        receipt = http.get(f"/v1/receipts/{job['result']['receipt_id']}").json()
        public_key = http.get("/v1/receipts/public-key").text
        assert _pointers(http, user_id=SUBJECT) == []
        survivors = _pointers(http, user_id=OTHER)
        for path, value in sent.items():
            if path.startswith(f"user/{OTHER}/"):
                assert http.get(f"/v1/memories/{path}").json()["value"] == value
            else:
                assert http.get(f"/v1/memories/{path}").status_code == 404
    assert verify_receipt(receipt, public_key)
    counts = receipt["counts"]
    assert (counts["pointers"], counts["objects"], counts["exports"], counts["keys"]) == \
        (8, 8, 1, 1), counts
    assert counts["orphans_swept"] == 0 and counts["object_versions"] == 0
    assert job["result"]["counts"]["pointers"] == 8
    assert {p["id"] for p in survivors} == {p["id"] for p in other_pointers}

    # The bucket agrees with the receipt: exactly the subject's objects and their export
    # archive are gone; everything else is still there.
    after = _files(bucket)
    assert after & (subject_paths | {archive}) == set()
    assert not any(f"/user/{SUBJECT.replace('@', '%40')}/" in path for path in after)
    gone = before - after
    assert gone == subject_paths | {archive}
    _no_temporaries(serving.env, bucket)
    with runtime.sessions() as session:
        live_keys = session.scalar(select(func.count()).select_from(SubjectKey).where(
            SubjectKey.scope_ref == SUBJECT))
    assert live_keys == 0


@pytest.mark.timeout(300)
def test_export_killed_before_upload_finishes_after_restart(api_only: Deployment,
                                                            runtime: Runtime,
                                                            tmp_path: Path) -> None:
    bucket = api_only.bucket_root
    with api_only.http() as http:
        sent = _seed(http)
        subject_pointers = _pointers(http, user_id=SUBJECT)
        response = http.post(f"/v1/subjects/{SUBJECT}/export", json={"format": "json"})
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
    before = _files(bucket)

    pause = tmp_path / "pause"
    worker = WorkerProcess(api_only.env).start(pause_at="export:before_upload",
                                               pause_file=pause)
    try:
        wait_for_pause(pause, worker.process)
        # The archive is built (the subject's values spooled) and about to be uploaded.
        spooled = [p for p in Path(api_only.env["TMPDIR"]).iterdir()]
        worker.kill()
        assert spooled == []  # spools are anonymous files: no name to leave behind
        _no_temporaries(api_only.env, bucket)
        assert _files(bucket) == before  # no partial archive
        worker = WorkerProcess(api_only.env).start()
        with api_only.http() as http:
            job = _wait_job(http, job_id)
            assert job["state"] == "completed", job
            assert _takeovers(http, job_id) == 1
            download = http.get(f"/v1/exports/{job_id}/download")
            assert download.status_code == 200, download.text
    finally:
        worker.kill()

    result = job["result"]
    archive_path = result["archive_path"]
    assert _files(bucket) - before == {archive_path}
    _no_temporaries(api_only.env, bucket)
    # Decrypt the archive from the bucket here and check it against the job's record and
    # against what the download served.
    plain = io.BytesIO()
    with runtime.sessions() as session:
        with (bucket / archive_path).open("rb") as src:
            export_download.open_archive(session, runtime.plane, uuid.UUID(_tenant(runtime)),
                                         archive_path, uuid.UUID(job_id), src, plain, sealed=True)
    data = plain.getvalue()
    assert hashlib.sha256(data).hexdigest() == result["sha256"]
    assert len(data) == result["size"]
    assert data == download.content

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        files = {name: archive.read(name) for name in archive.namelist()
                 if name != "manifest.json"}
    assert manifest["job_id"] == job_id and manifest["user_id"] == SUBJECT
    assert manifest["counts"]["pointers"] == 8 and manifest["counts"]["exported"] == 8
    assert manifest["counts"]["missing"] == manifest["counts"]["corrupt"] == 0
    items = manifest["items"]
    assert {i["pointer_id"] for i in items} == {p["id"] for p in subject_pointers}
    assert set(files) == {i["file"] for i in items}
    by_address = {f"{p['scope']}/{p['scope_ref']}/{p['key']}": p for p in subject_pointers}
    for item in items:
        address = f"{item['scope']}/{item['scope_ref']}/{item['key']}"
        expected = serialise(sent[address])
        assert files[item["file"]] == expected, address
        digest = hashlib.sha256(expected).hexdigest()
        assert item["file_sha256"] == item["content_sha256"] == digest, address
        assert by_address[address]["content_sha256"] == digest
        assert item["hash_verified"] is True


def _tenant(runtime: Runtime) -> str:
    with runtime.sessions() as session:
        tenant = session.scalar(select(Job.tenant_id).limit(1))
    return str(tenant)
