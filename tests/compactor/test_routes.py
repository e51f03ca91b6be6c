"""The compactor's routes over HTTP: per-tenant thresholds, starting a run, provenance;
admin only, validated with a sentence, audited, and blind to other tenants."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from tests.support.service import Tenant


def _audit(http: httpx.Client, operation: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = http.get("/v1/audit", params={"operation": operation,
                                                                "limit": 100}).json()["items"]
    return rows


def _wait(http: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("completed", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_config_defaults_then_set_then_read(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = http.get("/v1/compactor/config")
        assert first.status_code == 200, first.text
        body = first.json()
        assert {k: body[k] for k in ("min_events", "older_than_days", "enabled",
                                     "updated_at")} == {
            "min_events": 3, "older_than_days": 90, "enabled": True, "updated_at": None}
        assert body["schedule"] == tenant.stack.settings.compactor_schedule

        put = http.put("/v1/compactor/config",
                       json={"min_events": 5, "older_than_days": 30, "enabled": False})
        assert put.status_code == 200, put.text
        again = http.get("/v1/compactor/config").json()
        assert (again["min_events"], again["older_than_days"], again["enabled"]) == \
            (5, 30, False)
        assert again["updated_at"] is not None and again["next_run_at"] is None
        writes = _audit(http, "compactor_config_write")
        assert [(r["success"], r["detail"]) for r in writes] == [
            (True, "min_events=5 older_than_days=30 enabled=False")]
        assert len(_audit(http, "compactor_config_read")) == 2


@pytest.mark.parametrize(("body", "where"), [
    ({"min_events": 1}, "body.min_events"),
    ({"min_events": 101}, "body.min_events"),
    ({"older_than_days": -1}, "body.older_than_days"),
    ({"min_events": "many"}, "body.min_events"),
    ({"threshold": 3}, "body.threshold"),
])
def test_bad_config_is_a_422_naming_the_field(tenant: Tenant, body: dict[str, Any],
                                              where: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.put("/v1/compactor/config", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "validation_error"
        assert response.json()["detail"].startswith(where)
        assert http.get("/v1/compactor/config").json()["updated_at"] is None


@pytest.mark.parametrize("role", ["agent", "compliance"])
def test_only_admins_configure_or_run_the_compactor(tenant: Tenant, role: str) -> None:
    key = tenant.key(role)
    with tenant.stack.http(key) as http:
        for method, path, body in (("GET", "/v1/compactor/config", None),
                                   ("PUT", "/v1/compactor/config", {"min_events": 4}),
                                   ("POST", "/v1/compactor/run", {})):
            response = http.request(method, path, json=body)
            assert response.status_code == 403, (method, path, response.text)
            assert response.json()["error"] == "forbidden"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get("/v1/compactor/config").json()["min_events"] == 3
        denied = [r for r in http.get("/v1/audit", params={"limit": 100}).json()["items"]
                  if not r["success"]]
        assert len(denied) == 3


def test_a_dry_run_is_a_job_that_counts_and_writes_nothing(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.post("/v1/compactor/run", json={"dry_run": True})
        assert response.status_code == 202, response.text
        job = response.json()
        assert (job["kind"], job["state"]) == ("compact", "queued")
        done = _wait(http, job["id"])
        assert done["state"] == "completed", done
        assert done["result"] == {
            "buckets": 0, "compacted_buckets": 0, "events_compressed": 0,
            "entries_written": 0, "failed_buckets": 0, "skipped_buckets": 0,
            "budget_spent": False, "dry_run": True, "failures": {}}
        assert [r["detail"] for r in _audit(http, "compact_run")] == [
            f"dry run job {job['id']} queued"]
    assert tenant.objects() == []


@pytest.mark.parametrize(("body", "detail"), [
    ({"scope_ref": "ent_acme"}, "scope_ref needs scope"),
    ({"scope": "galaxy"}, "body.scope"),
    ({"dry_run": "perhaps"}, "body.dry_run"),
    ({"scope": "entity", "scope_ref": "a\u0000b"}, "body.scope_ref"),
])
def test_bad_run_requests_are_422(tenant: Tenant, body: dict[str, Any], detail: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.post("/v1/compactor/run", json=body)
        assert response.status_code == 422, response.text
        assert detail in response.json()["detail"]
        assert _audit(http, "compact_run") == []


def test_another_tenants_compaction_job_and_provenance_are_not_found(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    with tenant.stack.http(other.admin_key) as http:
        job_id = http.post("/v1/compactor/run", json={"dry_run": True}).json()["id"]
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get(f"/v1/jobs/{job_id}").status_code == 404
        missing = http.get(f"/v1/compactor/provenance/{uuid.uuid4()}")
        assert missing.status_code == 404
        assert missing.json()["error"] == "not_found"
        assert missing.json()["detail"].startswith("no compactor entry ")


def test_a_run_over_a_users_scope_keeps_no_user_id_after_that_users_erasure(
        tenant: Tenant) -> None:
    """A run by hand over ``user/<id>`` names the data subject; once the subject is erased,
    the job row holds only the erasure's salted hash of the id."""
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        run = http.post("/v1/compactor/run", json={"scope": "user", "scope_ref": user})
        assert run.status_code == 202, run.text
        assert _wait(http, run.json()["id"])["state"] == "completed"
        erase = http.post(f"/v1/subjects/{user}/erase", json={})
        assert erase.status_code == 202, erase.text
        assert _wait(http, erase.json()["id"])["state"] == "completed"
    with tenant.stack.runtime.sessions() as session:
        from control_plane.db.models import Job

        job = session.get(Job, uuid.UUID(run.json()["id"]))
        assert job is not None
        assert job.subject is not None and job.subject.startswith("hmac:")
        assert job.params["scope_ref"] == job.subject
        assert user not in repr((job.subject, job.params, job.result, job.progress))
