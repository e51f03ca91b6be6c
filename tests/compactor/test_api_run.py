"""The compactor end to end over HTTP, run by the server's own job worker: events in, a
run by hand, the events hidden from the default listing, one entry with source compactor,
its provenance; scoped keys and other tenants see nothing of it; no content in the control
plane."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.support.service import Tenant

BODIES = [
    "## Call with Acme\nWe agreed to raise the ROAS target to 4 for Q3. Lovely weather.",
    "Maria decided to move 20% of the budget to Meta.",
    "Chit-chat about the weekend only.",
    "Acme will renew for $120k if the pilot hits 3.5 ROAS.",
]


def _wait(http: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("completed", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def _run(http: httpx.Client, **body: Any) -> dict[str, Any]:
    response = http.post("/v1/compactor/run", json=body)
    assert response.status_code == 202, response.text
    job = _wait(http, response.json()["id"])
    assert job["state"] == "completed", job
    return job


def _post_events(http: httpx.Client, scope: str, ref: str, bodies: list[str],
                 days_ago: int) -> list[dict[str, Any]]:
    sent = []
    for i, body in enumerate(bodies):
        when = datetime.now(UTC) - timedelta(days=days_ago - i)
        response = http.post("/v1/events", json={
            "scope": scope, "scope_ref": ref, "kind": "call_summary", "body": body,
            "source": "call", "occurred_at": when.isoformat()})
        assert response.status_code == 201, response.text
        sent.append(response.json())
    return sent


def test_a_run_by_hand_compacts_old_events_into_one_traceable_entry(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        old = _post_events(http, "entity", "ent_acme", BODIES, days_ago=120)
        _post_events(http, "project", "p1", BODIES[:3], days_ago=5)

        dry = _run(http, dry_run=True)["result"]
        assert (dry["dry_run"], dry["buckets"], dry["events_compressed"],
                dry["entries_written"]) == (True, 1, 4, 1)
        listed = http.get("/v1/events", params={"scope": "entity", "scope_ref": "ent_acme"})
        assert len(listed.json()["items"]) == 4

        job = _run(http)
        assert job["kind"] == "compact"
        assert job["result"] == {
            "buckets": 1, "compacted_buckets": 1, "events_compressed": 4,
            "entries_written": 1, "failed_buckets": 0, "skipped_buckets": 0,
            "budget_spent": False, "dry_run": False, "failures": {}}

        hidden = http.get("/v1/events", params={"scope": "entity", "scope_ref": "ent_acme"})
        assert hidden.json()["items"] == []
        shown = http.get("/v1/events", params={"scope": "entity", "scope_ref": "ent_acme",
                                               "include_compressed": "true"}).json()["items"]
        assert [e["id"] for e in shown] == [e["id"] for e in old]
        assert all(e["compressed_at"] is not None for e in shown)

        page = http.get("/v1/entries", params={"scope": "entity", "scope_ref": "ent_acme"})
        [entry] = page.json()["items"]
        assert (entry["source"], entry["importance"], entry["tags"]) == \
            ("compactor", 4, ["compacted"])
        assert entry["title"].startswith("Compacted: 4 events, ")
        summary = http.get(f"/v1/entries/{entry['id']}").json()["summary"]
        assert "ROAS target to 4" in summary and "20% of the budget" in summary
        assert "Chit-chat" not in summary

        provenance = http.get(f"/v1/compactor/provenance/{entry['id']}")
        assert provenance.status_code == 200, provenance.text
        trace = provenance.json()
        assert trace["job_id"] == job["id"] and trace["event_count"] == 4
        assert (trace["provider"], trace["model"], trace["prompt_version"]) == \
            ("memplane", "extractive-v1", "extract-v1")
        assert [(e["event_id"], e["event_sha256"]) for e in trace["events"]] == \
            [(e["id"], e["content_sha256"]) for e in old]

        again = _run(http)["result"]
        assert (again["buckets"], again["entries_written"]) == (0, 0)

        # Nothing of the bodies or the summary reached the control plane's answers.
        audit = http.get("/v1/audit", params={"limit": 1000}).json()["items"]
        text = repr(audit) + repr(job) + repr(trace) + entry["title"]
        for word in ("ROAS", "Maria", "Meta", "weather", "Chit-chat"):
            assert word not in text, word


def test_a_run_limited_to_one_scope_ref_and_the_tenants_thresholds(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _post_events(http, "entity", "ent_acme", BODIES, days_ago=120)
        young = _post_events(http, "project", "p1", BODIES[:2], days_ago=5)
        assert http.put("/v1/compactor/config",
                        json={"min_events": 2, "older_than_days": 1}).status_code == 200
        result = _run(http, scope="project", scope_ref="p1")["result"]
        assert (result["buckets"], result["events_compressed"]) == (1, 2)
        still = http.get("/v1/events", params={"scope": "entity", "scope_ref": "ent_acme"})
        assert len(still.json()["items"]) == 4
        shown = http.get("/v1/events", params={"scope": "project", "scope_ref": "p1",
                                               "include_compressed": "true"}).json()["items"]
        assert {e["id"] for e in shown if e["compressed_at"]} == {e["id"] for e in young}


def test_provenance_follows_scoped_keys_and_tenants(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _post_events(http, "entity", "ent_acme", BODIES, days_ago=120)
        _run(http)
        [entry] = http.get("/v1/entries", params={"scope": "entity",
                                                  "scope_ref": "ent_acme"}).json()["items"]
        keys = {}
        for name, ref in (("inside", "ent_acme"), ("outside", "ent_other")):
            made = http.post("/v1/api-keys", json={
                "role": "agent", "name": name,
                "scopes": [{"scope": "entity", "scope_ref": ref}]})
            assert made.status_code == 201, made.text
            keys[name] = made.json()["api_key"]
    path = f"/v1/compactor/provenance/{entry['id']}"
    with tenant.stack.http(keys["inside"]) as http:
        assert http.get(path).status_code == 200
    with tenant.stack.http(keys["outside"]) as http:
        refused = http.get(path)
        assert refused.status_code == 404
        assert refused.json()["detail"] == f"no compactor entry {entry['id']}"
    other = tenant.stack.new_tenant()
    with tenant.stack.http(other.admin_key) as http:
        assert http.get(path).status_code == 404
