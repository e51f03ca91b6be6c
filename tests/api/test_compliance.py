"""A data subject's export and erasure end to end, through the SDK against a running server
with its in-process job worker, on SQLite and PostgreSQL with the local bucket.

The bucket is checked by listing it directly from the test, not through the service.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import memplane
from control_plane.compliance import erasure_walk, export_collect
from tests.support.service import Tenant

SUBJECT, BYSTANDER = "user-ana@example.com", "user-ben"
N_SUBJECT = 300


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The export's and the erasure's pages of pointers made small, so that the subject's
    memories take several of each."""
    monkeypatch.setattr(export_collect, "PAGE", 50)
    monkeypatch.setattr(erasure_walk, "BATCH", 70)


def _address(user: str, i: int) -> dict[str, Any]:
    if i % 3 == 0:
        return {"scope": "user", "scope_ref": user, "key": f"pref-{i}"}
    if i % 3 == 1:
        return {"scope": "conversation", "scope_ref": f"conv-{i % 25}", "key": f"{user}-{i}",
                "user_id": user}
    return {"scope": "agent", "scope_ref": "support-bot", "key": f"{user}-{i}", "user_id": user}


def _write_all(tenant: Tenant, user: str, n: int) -> dict[str, Any]:
    """Write n memories of ``user`` through the batch API; returns {pointer id: value}."""
    values = [{"owner": user, "i": i, "text": f"secret of {user} #{i}"} for i in range(n)]
    with tenant.client() as client:
        results = client.memory.set_many(
            [_address(user, i) | {"value": value} for i, value in enumerate(values)])
    written = {}
    for result, value in zip(results, values, strict=True):
        pointer = result.raise_for_error().pointer
        assert pointer is not None
        written[pointer.id] = value
    return written


@pytest.mark.slow
@pytest.mark.usefixtures("small_pages")
def test_export_then_erase_a_subject_leaves_the_bystander_untouched(
        tenant: Tenant, tmp_path: Path) -> None:
    bystander = _write_all(tenant, BYSTANDER, 60)
    bystander_files = set(tenant.objects())  # objects may be encrypted: know them by path
    assert len(bystander_files) == 60
    subject = _write_all(tenant, SUBJECT, N_SUBJECT)
    officer_key = tenant.key("compliance")

    with tenant.stack.client(officer_key) as officer:
        # -- export ---------------------------------------------------------------------
        job = officer.memory.export(user_id=SUBJECT)
        assert (job.kind, job.state) == ("export", "queued")
        done = officer.jobs.wait(job.id, timeout=300)
        assert done.state == "completed", done.error
        archive = tmp_path / "export.zip"
        size = officer.exports.download(job.id, archive)
        assert size == archive.stat().st_size == done.result["size"]
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == done.result["sha256"]
        with zipfile.ZipFile(archive) as z:
            manifest = json.loads(z.read("manifest.json"))
            assert manifest["format"] == "memplane-export/1"
            assert manifest["job_id"] == job.id and manifest["user_id"] == SUBJECT
            assert manifest["counts"] == {
                "pointers": N_SUBJECT, "exported": N_SUBJECT, "missing": 0, "corrupt": 0,
                "deleted_during_export": 0, "bytes": manifest["counts"]["bytes"],
                "entries": 0, "events": 0, "events_exported": 0, "events_missing": 0,
                "events_corrupt": 0}
            items = {item["pointer_id"]: item for item in manifest["items"]}
            assert set(items) == set(subject)
            for pointer_id, value in subject.items():
                data = z.read(items[pointer_id]["file"])
                assert json.loads(data) == value
                assert hashlib.sha256(data).hexdigest() == items[pointer_id]["content_sha256"]
                assert items[pointer_id]["hash_verified"] is True
            names = set(z.namelist())
            assert names == {"manifest.json"} | {f"items/{p}.json" for p in subject}
            assert not any(BYSTANDER.encode() in z.read(name) for name in names)
        export_dir = tenant.bucket_dir / "exports" / job.id
        assert [p.name for p in export_dir.iterdir()] == ["export.zip"]

        # -- dry run ----------------------------------------------------------------------
        plan = officer.jobs.wait(officer.memory.erase_user(SUBJECT, dry_run=True).id)
        assert plan.state == "completed"
        assert plan.result["pointers"] == N_SUBJECT
        assert plan.result["pointers_by_scope"] == {"user": 100, "conversation": 100,
                                                    "agent": 100}
        assert sum(1 for _ in officer.memory.iter_pointers(user_id=SUBJECT, limit=120)) \
            == N_SUBJECT  # nothing deleted by the dry run

        # -- erase ------------------------------------------------------------------------
        erase = officer.memory.erase_user(SUBJECT)
        finished = officer.jobs.wait(erase.id, timeout=300)
        assert finished.state == "completed", finished.error
        assert finished.result["work_done"] is True
        receipt = officer.receipts.get(finished.result["receipt_id"])
        body = receipt.as_dict()
        assert body["counts"]["pointers"] == N_SUBJECT
        assert body["counts"]["objects"] == N_SUBJECT
        assert body["counts"]["exports"] == 1
        assert body["counts"]["events"] == 0
        assert SUBJECT not in json.dumps(body)
        salt = bytes.fromhex(body["subject"]["salt"])
        assert body["subject"]["hash"] == hashlib.sha256(salt + SUBJECT.encode()).hexdigest()
        assert body["audit"]["first_seq"] < body["audit"]["last_seq"]
        public_key = officer.receipts.public_key()
        assert officer.receipts.verify(receipt, public_key) is True
        tampered = json.loads(json.dumps(body))
        tampered["counts"]["pointers"] = N_SUBJECT - 1
        assert officer.receipts.verify(tampered, public_key) is False

        # both planes, checked directly
        assert list(officer.memory.iter_pointers(user_id=SUBJECT)) == []
        assert list(officer.memory.iter_pointers(scope="user", scope_ref=SUBJECT)) == []
        assert set(tenant.objects()) == bystander_files
        subject_dir = tenant.bucket_dir / "memories" / "user" / quote(SUBJECT, safe="")
        assert not subject_dir.exists() or not any(p.is_file() for p in subject_dir.rglob("*"))
        assert not export_dir.exists() or not any(p.is_file() for p in export_dir.rglob("*"))
        with pytest.raises(memplane.NotFound):
            officer.exports.download(job.id, tmp_path / "again.zip")

        # -- a rerun does no work and says so -------------------------------------------------
        again = officer.jobs.wait(officer.memory.erase_user(SUBJECT).id)
        assert again.state == "completed"
        assert again.result["work_done"] is False
        assert again.result["counts"] == {"pointers": 0, "objects": 0, "versions": 0,
                                          "orphans": 0, "exports": 0, "events": 0,
                                          "entries": 0, "compactor_entries": 0, "keys": 0,
                                          "search_scopes_rewritten": 0,
                                          "compactor_events_released": 0}
        assert "nothing was deleted" in again.result["note"]

    # the bystander reads back intact
    with tenant.client() as client:
        for value in bystander.values():
            address = _address(BYSTANDER, value["i"])
            address.pop("user_id", None)
            assert client.memory.get(**address).value == value
