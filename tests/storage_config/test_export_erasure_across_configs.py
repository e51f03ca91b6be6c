"""Export and erasure across several storage configurations: a data subject whose memories
and events live in two buckets on two emulators (the tenant's default on S3 with versioning,
an agent's user memories on Azure) is exported whole, then erased from both — each bucket
listed afterwards with the vendor's own client — and the signed receipt names every bucket
the erasure walked. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable
from pathlib import Path

from tests.support.buckets import AzureBucket, S3Bucket
from tests.support.emulators import Azurite, MotoServer
from tests.support.service import Tenant

from .helpers import call, create

SUBJECT, BYSTANDER, BOT = "user-ines", "user-jon", "concierge"


def _content(keys: Iterable[str]) -> set[str]:
    """Object keys without the audit chain's checkpoints (written by the sealer meanwhile)."""
    return {k for k in keys if "/audit/" not in f"/{k}"}


def _write(tenant: Tenant, bot_key: str, user: str) -> dict[str, object]:
    """Two memories in the default bucket, two through the agent (its bucket), one event."""
    written: dict[str, object] = {}
    with tenant.client() as admin:
        for i, address in enumerate([
                {"scope": "user", "scope_ref": user, "key": "profile"},
                {"scope": "team", "scope_ref": "sales", "key": f"{user}-note", "user_id": user}]):
            value = {"owner": user, "where": "default", "i": i}
            written[admin.memory.set(value=value, **address).id] = value  # type: ignore[arg-type]
        admin.events.append("user", user, "call_summary", f"call with {user}", user_id=user)
    with tenant.stack.client(bot_key) as bot:
        for i, address in enumerate([
                {"scope": "user", "scope_ref": user, "key": "prefs"},
                {"scope": "conversation", "scope_ref": f"c-{user}", "key": "ctx",
                 "user_id": user}]):
            value = {"owner": user, "where": "agent", "i": i}
            written[bot.memory.set(value=value, **address).id] = value  # type: ignore[arg-type]
    return written


def test_export_and_erasure_walk_every_bucket_and_the_receipt_names_each(
        tenant: Tenant, moto_server: MotoServer, azurite_server: Azurite,
        tmp_path: Path) -> None:
    s3, azure = S3Bucket(moto_server, versioned=True), AzureBucket(azurite_server)
    default = call(tenant, "PUT", "/v1/storage/config",
                   json={"storage_type": "s3", "connection_config": s3.connection_config})
    assert default.status_code == 200, default.text
    agent_config = create(tenant, {"name": "agent-users", "storage_type": "azure",
                                   "connection_config": azure.connection_config}).json()
    call(tenant, "PUT", f"/v1/agents/{BOT}", json={"memory": {"userMemory": {
        "storageConfigId": agent_config["storage_config_id"]}}})
    with tenant.client() as admin:
        bot_key = admin.keys.create(role="agent", name="bot", agent_id=BOT).api_key
    s3_prefix, az_prefix = default.json()["prefix"] + "/", agent_config["prefix"] + "/"

    _write(tenant, bot_key, BYSTANDER)
    s3_before, az_before = set(s3.keys(s3_prefix)), set(azure.keys(az_prefix))
    subject = _write(tenant, bot_key, SUBJECT)
    assert len(set(s3.keys(s3_prefix + "memories/")) - s3_before) == 2
    assert len(set(azure.keys(az_prefix)) - az_before) == 2

    with tenant.stack.client(tenant.key("compliance")) as officer:
        export = officer.jobs.wait(officer.memory.export(user_id=SUBJECT).id, timeout=300)
        assert export.state == "completed", export.error
        archive = tmp_path / "export.zip"
        officer.exports.download(export.id, archive)
        with zipfile.ZipFile(archive) as z:
            manifest = json.loads(z.read("manifest.json"))
            items = {i["pointer_id"]: i for i in manifest["items"]}
            assert set(items) == set(subject)
            assert {p: json.loads(z.read(items[p]["file"])) for p in subject} == subject
            assert (manifest["counts"]["exported"], manifest["counts"]["events_exported"]) == (
                4, 1)

        erase = officer.jobs.wait(officer.memory.erase_user(SUBJECT).id, timeout=300)
        assert erase.state == "completed", erase.error
        receipt = officer.receipts.get(erase.result["receipt_id"])
        assert officer.receipts.verify(receipt, officer.receipts.public_key()) is True
        body = receipt.as_dict()
        assert (body["counts"]["pointers"], body["counts"]["objects"],
                body["counts"]["events"]) == (4, 5, 1)  # objects: 4 values, 1 event body
        assert list(officer.memory.iter_pointers(user_id=SUBJECT)) == []

    walked = {b["storage_config_id"]: b for b in body["buckets"]}
    assert walked[default.json()["storage_config_id"]] == {
        "storage_config_id": default.json()["storage_config_id"], "name": None,
        "storage_type": "s3", "bucket": s3.bucket, "prefix": s3_prefix.rstrip("/"),
        "region": "us-east-1", "is_default": True}
    assert walked[agent_config["storage_config_id"]] == {
        "storage_config_id": agent_config["storage_config_id"], "name": "agent-users",
        "storage_type": "azure", "bucket": azure.connection_config["container"],
        "prefix": az_prefix.rstrip("/"), "region": None, "is_default": False}
    assert [b["storage_type"] for b in body["buckets"]] == ["default", "s3", "azure"]
    assert "AccountKey" not in json.dumps(body)
    assert s3.connection_config["secret_access_key"] not in json.dumps(body)

    # Nothing of the subject in either bucket (every S3 version and marker included); the
    # bystander's objects are untouched. The export archive went too.
    assert _content(s3.keys(s3_prefix)) == _content(s3_before)
    versions, markers = s3.versions(s3_prefix + "memories/")
    assert set(versions) == {k for k in s3_before if k.startswith(s3_prefix + "memories/")}
    assert markers == []
    assert set(azure.keys(az_prefix)) == az_before
    with tenant.stack.client(bot_key) as bot:
        assert bot.memory.get(scope="user", scope_ref=BYSTANDER, key="prefs").value == {
            "owner": BYSTANDER, "where": "agent", "i": 0}
