"""A conversation's subject on a versioned S3 bucket (moto), on SQLite and PostgreSQL: the
export holds their messages and summary, hash-verified; the erasure leaves no message, no
summary, no version and no delete marker of them in the bucket (listed with boto3) and no
conversation row naming them; another subject's conversation stays whole."""

from __future__ import annotations

import json
import uuid
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import select

from control_plane.db.models import Conversation
from tests.support.buckets import S3Bucket
from tests.support.service import Tenant

from .test_messages import _add, _job_done


@pytest.fixture
def s3_tenant(tenant: Tenant, moto_server: object) -> tuple[Tenant, S3Bucket]:
    bucket = S3Bucket(moto_server, versioned=True)  # type: ignore[arg-type]
    with tenant.stack.http(tenant.admin_key) as http:
        put = http.put("/v1/storage/config", json={"storage_type": "s3",
                                                   "connection_config": bucket.connection_config})
    assert put.status_code == 200, put.text
    return tenant, bucket


def test_export_then_erasure_of_a_conversation_subject(s3_tenant: tuple[Tenant, S3Bucket],
                                                        tmp_path: Path) -> None:
    tenant, bucket = s3_tenant
    user = f"u-{uuid.uuid4().hex[:6]}"
    conv, kept = f"c-{uuid.uuid4().hex[:8]}", f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        for i in range(8):
            _add(http, conv, f"We agreed on step {i} with Acme.", user_id=user,
                 context_window_limit=256)
        _add(http, kept, "someone else", user_id="u-keep")
        summary_job = http.post(f"/v1/conversations/{conv}/summarize").json()["id"]
        summarized = _job_done(http, summary_job)["result"]["messages"]
        state = http.get(f"/v1/conversations/{conv}").json()
    # 8 × 13 tokens; the newest 64 tokens (4 messages) stay, the 4 older are summarised.
    assert (summarized, state["summarized_through"]) == (4, 4)
    with tenant.client() as officer:
        job = officer.memory.export(user_id=user)
        assert officer.jobs.wait(job.id).state == "completed"
        officer.exports.download(job.id, tmp_path / "export.zip")
        with zipfile.ZipFile(tmp_path / "export.zip") as archive:
            manifest = json.loads(archive.read("manifest.json"))
            items = {i["key"]: json.loads(archive.read(i["file"]))
                     for i in manifest["items"] if i.get("key")}
        assert all(i["hash_verified"] for i in manifest["items"])
        assert [items[f"m/{n:08d}"]["content"] for n in range(1, 9)] == [
            f"We agreed on step {n - 1} with Acme." for n in range(1, 9)]
        assert items["summary"]["through"] == 4
        assert "We agreed on step 0 with Acme" in items["summary"]["text"]
        assert sorted(items) == [f"m/{n:08d}" for n in range(1, 9)] + ["summary"]
        before_versions, _ = bucket.versions()
        assert any(f"/conversation/{conv}/" in k for k in before_versions)
        done = officer.jobs.wait(officer.memory.erase_user(user).id)
    assert done.state == "completed"
    versions, markers = bucket.versions()
    assert [k for k in versions + markers if f"/conversation/{conv}/" in k] == []
    assert any(f"/conversation/{kept}/" in k for k in versions)
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get(f"/v1/conversations/{conv}").status_code == 404
        other = http.get(f"/v1/conversations/{kept}/messages").json()["items"]
    assert [m["content"] for m in other] == ["someone else"]
    with tenant.stack.engine.connect() as conn:
        rows = conn.execute(select(Conversation.conversation_id, Conversation.subject_user_id)
                            .where(Conversation.tenant_id == tenant.id)).all()
    assert [tuple(r) for r in rows] == [(kept, "u-keep")]
