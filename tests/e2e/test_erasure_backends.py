"""A data subject's export and erasure on each cloud backend, the bucket checked with the
vendor's own client: no object and no object version of the subject remains. Runs on both
control-plane databases (SQLite and PostgreSQL): the erasure's pointer pages, batch deletes
and verification queries differ between them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from control_plane.compliance import export_collect
from storage_adapters import azure_listing, gcs_listing, s3_listing
from tests.api.test_compliance import _address, _write_all
from tests.support.buckets import RawBucket, S3Bucket
from tests.support.service import Tenant

SUBJECT, BYSTANDER = "user-cleo", "user-dan"
N_SUBJECT = 230


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch deletes and export pages made small, so that the subject's memories take several
    of each on every vendor (the vendors' own limits — S3 1,000 keys a request, Azure 256, GCS
    100 — are held by each adapter's contract test, tests/storage_adapters/contract.py)."""
    monkeypatch.setattr(s3_listing, "DELETE_BATCH_LIMIT", 100)
    monkeypatch.setattr(azure_listing, "DELETE_BATCH_LIMIT", 40)
    monkeypatch.setattr(gcs_listing, "BATCH_LIMIT", 30)
    monkeypatch.setattr(export_collect, "PAGE", 50)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("raw_bucket", ["s3-versioned", "gcs", "azure"], indirect=True)
def test_export_and_erasure_walk_the_tenants_own_bucket(tenant: Tenant, raw_bucket: RawBucket,
                                                       tmp_path: Path) -> None:
    with tenant.client() as admin:
        config = admin.storage.configure(storage_type=raw_bucket.name,
                                         connection_config=raw_bucket.connection_config)
    prefix = config.prefix + "/"
    bystander = _write_all(tenant, BYSTANDER, 30)
    bystander_keys = set(raw_bucket.keys(prefix))
    subject = _write_all(tenant, SUBJECT, N_SUBJECT)
    assert len(raw_bucket.keys(prefix)) == N_SUBJECT + 30

    with tenant.stack.client(tenant.key("compliance")) as officer:
        export = officer.jobs.wait(officer.memory.export(user_id=SUBJECT).id, timeout=600)
        assert export.state == "completed", export.error
        archive = tmp_path / "export.zip"
        officer.exports.download(export.id, archive)
        with zipfile.ZipFile(archive) as z:
            manifest = json.loads(z.read("manifest.json"))
            assert manifest["counts"]["exported"] == N_SUBJECT
            items = {i["pointer_id"]: i for i in manifest["items"]}
            assert {p: json.loads(z.read(items[p]["file"])) for p in subject} == subject
        assert [k for k in raw_bucket.keys(prefix + "exports/")] != []

        erase = officer.jobs.wait(officer.memory.erase_user(SUBJECT).id, timeout=600)
        assert erase.state == "completed", erase.error
        receipt = officer.receipts.get(erase.result["receipt_id"])
        assert officer.receipts.verify(receipt, officer.receipts.public_key()) is True
        counts = receipt.as_dict()["counts"]
        assert (counts["pointers"], counts["objects"]) == (N_SUBJECT, N_SUBJECT)
        assert list(officer.memory.iter_pointers(user_id=SUBJECT)) == []

    assert set(raw_bucket.keys(prefix)) == bystander_keys  # exports gone too
    if isinstance(raw_bucket, S3Bucket):
        versions, markers = raw_bucket.versions(prefix)
        assert set(versions) == bystander_keys
        assert markers == []
    with tenant.client() as client:
        for value in bystander.values():
            address = _address(BYSTANDER, value["i"])
            address.pop("user_id", None)
            assert client.memory.get(**address).value == value
