"""GET /v1/subjects/{user_id} (what memplane holds about a subject, counted, no content) and
GET /v1/whoami (the calling key): roles, tenant isolation, the audit rows they leave."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.console.seeding import seed_subject


def _audit(tenant: Any, operation: str) -> list[dict[str, Any]]:
    with tenant.stack.http(tenant.admin_key) as http:
        items: list[dict[str, Any]] = http.get(
            "/v1/audit", params={"operation": operation}).json()["items"]
    return items


def _wait(http: Any, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        job: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("completed", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def test_the_summary_counts_each_layer_and_names_holds_and_jobs(tenant: Any) -> None:
    user = f"s-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)
    officer = tenant.key("compliance")
    with tenant.stack.http(officer) as http:
        http.post("/v1/legal-holds", json={"user_id": user, "reason": "audit"})
        export = _wait(http, http.post(f"/v1/subjects/{user}/export").json()["id"])
        summary = http.get(f"/v1/subjects/{user}").json()
    assert export["state"] == "completed"
    assert summary["layers"] == {"memories": 2, "entries": 1, "events": 1, "conversations": 0,
                                 "knowledge": 0, "embeddings": 0}
    assert (summary["total"], summary["erased"], summary["erasure_in_progress"]) == (
        4, False, None)
    assert [(h["target"], h["reason"]) for h in summary["holds"]] == [("subject", "audit")]
    assert [(j["id"], j["kind"], j["state"], j["receipt_id"]) for j in summary["jobs"]] == [
        (export["id"], "export", "completed", None)]
    assert summary["jobs"][0]["archive_expires_at"] == export["result"]["expires_at"]
    assert [row["detail"] for row in _audit(tenant, "subject_read")] == [
        "subject summary: 4 items, 1 holds, 1 jobs"]


def test_an_erased_subject_shows_its_erasure_and_receipt(tenant: Any) -> None:
    user = f"s-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)
    with tenant.stack.http(tenant.key("compliance")) as http:
        erased = _wait(http, http.post(f"/v1/subjects/{user}/erase").json()["id"])
        summary = http.get(f"/v1/subjects/{user}").json()
    assert erased["state"] == "completed"
    assert summary["layers"] == dict.fromkeys(summary["layers"], 0)
    assert summary["erased"] is True
    assert [(j["kind"], j["receipt_id"]) for j in summary["jobs"]] == [
        ("erase", erased["result"]["receipt_id"])]
    # no row of the log names the subject
    assert all(user not in row["detail"] for row in _audit(tenant, "subject_read"))


def test_other_tenants_and_other_roles_see_nothing(tenant: Any, stack: Any) -> None:
    user = f"s-{uuid.uuid4().hex[:8]}"
    seed_subject(tenant, user)
    other = stack.new_tenant()
    with stack.http(other.key("compliance")) as http:
        elsewhere = http.get(f"/v1/subjects/{user}").json()
    assert (elsewhere["total"], elsewhere["jobs"], elsewhere["holds"]) == (0, [], [])
    for role in ("agent", "user"):
        key = tenant.key(role) if role == "agent" else None
        if key is None:
            with tenant.stack.http(tenant.admin_key) as admin:
                key = admin.post("/v1/api-keys", json={"role": "user", "user_id": user}
                                 ).json()["api_key"]
        with tenant.stack.http(key) as http:
            refused = http.get(f"/v1/subjects/{user}")
        assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert [r["success"] for r in _audit(tenant, "access_denied")] == [False, False]
    with tenant.stack.http(tenant.admin_key) as http:
        bad = http.get("/v1/subjects/" + "x" * 300)
    assert bad.status_code == 422 and "user_id" in bad.json()["detail"]


def test_whoami_names_the_key_and_is_audited(tenant: Any) -> None:
    agent = tenant.key("agent")
    with tenant.stack.http(agent) as http:
        me = http.get("/v1/whoami").json()
    with tenant.stack.http(tenant.admin_key) as http:
        admin = http.get("/v1/whoami").json()
    with tenant.stack.http() as anonymous:
        missing = anonymous.get("/v1/whoami")
    assert (me["role"], me["tenant_id"], me["scoped"]) == ("agent", str(tenant.id), False)
    assert (admin["role"], admin["can_create_tenants"]) == ("admin", False)
    assert me["key_id"] != admin["key_id"]
    assert missing.status_code == 401
    rows = _audit(tenant, "whoami")
    assert [(r["accessor_id"], r["detail"]) for r in rows] == [
        (f"key:{me['key_id']}", "key role agent"), (f"key:{admin['key_id']}", "key role admin")]
