"""The retention, cleanup and legal-hold routes over HTTP, on SQLite and PostgreSQL: roles,
bad input answered with a sentence, tenant isolation, idempotent hold creation, audit rows."""

from __future__ import annotations

import uuid

from tests.support.service import Tenant

POLICY = {"scope": "user", "memory_type": "conversation_history", "retention_days": 90,
          "archive_after_days": 30, "auto_delete": True}


def test_policies_are_upserted_listed_and_deleted_by_admins(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = http.put("/v1/retention-policies", json=POLICY)
        assert first.status_code == 200, first.text
        body = first.json()
        assert {k: body[k] for k in POLICY} == {**POLICY}
        again = http.put("/v1/retention-policies", json={**POLICY, "retention_days": 120})
        assert (again.json()["id"], again.json()["retention_days"]) == (body["id"], 120)
        every = http.put("/v1/retention-policies", json={
            "scope": "institutional", "retention_days": 10, "auto_delete": False})
        assert (every.json()["scope"], every.json()["memory_type"]) == ("tenant", None)
        listed = http.get("/v1/retention-policies").json()
        assert [(p["scope"], p["memory_type"], p["retention_days"]) for p in listed["items"]] \
            == [("tenant", None, 10), ("user", "conversation_history", 120)]
        assert listed["next_cursor"] is None
        assert http.delete(f"/v1/retention-policies/{body['id']}").status_code == 204
        gone = http.delete(f"/v1/retention-policies/{body['id']}")
        assert (gone.status_code, gone.json()["error"]) == (404, "not_found")
        assert len(http.get("/v1/retention-policies").json()["items"]) == 1
        audit = http.get("/v1/audit", params={"operation": "retention_policy_write"}).json()
        assert len(audit["items"]) == 3


def test_roles(tenant: Tenant) -> None:
    agent, officer = tenant.key("agent"), tenant.key("compliance")
    with tenant.stack.http(agent) as http:
        assert http.put("/v1/retention-policies", json=POLICY).status_code == 403
        assert http.get("/v1/retention-policies").status_code == 403
        assert http.post("/v1/retention/run", json={}).status_code == 403
        assert http.post("/v1/legal-holds", json={"tenant": True,
                                                  "reason": "other"}).status_code == 403
        assert http.get("/v1/legal-holds").status_code == 403
        dry = http.post("/v1/cleanup", json={"older_than_days": 1, "dry_run": True})
        assert (dry.status_code, dry.json()["matched"]) == (200, 0)
    with tenant.stack.http(officer) as http:
        assert http.put("/v1/retention-policies", json=POLICY).status_code == 403
        assert http.get("/v1/retention-policies").status_code == 200
        assert http.post("/v1/retention/run", json={}).status_code == 403
        placed = http.post("/v1/legal-holds", json={"user_id": "u1", "reason": "litigation"})
        assert placed.status_code == 201
        assert http.delete(f"/v1/legal-holds/{placed.json()['id']}").status_code == 200


def test_bad_input_gets_a_sentence(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for body, words in [
            ({**POLICY, "archive_after_days": 90}, "archive_after_days must be less than"),
            ({**POLICY, "retention_days": 0}, "retention_days"),
            ({**POLICY, "scope": "planet"}, "scope"),
        ]:
            answer = http.put("/v1/retention-policies", json=body)
            assert answer.status_code == 422, body
            assert answer.json()["error"] == "validation_error"
            assert words in answer.text
        for body, words in [
            ({"reason": "litigation"}, "name exactly one target"),
            ({"user_id": "u1", "tenant": True, "reason": "other"}, "name exactly one target"),
            ({"scope": "user", "reason": "other"}, "needs both scope and scope_ref"),
            ({"user_id": "u1", "reason": "because I said so"}, "reason"),
        ]:
            answer = http.post("/v1/legal-holds", json=body)
            assert answer.status_code == 422, body
            assert words in answer.text
        cleanup = http.post("/v1/cleanup", json={"scope_ref": "x", "older_than_days": 3})
        assert cleanup.status_code == 422
        assert "scope_ref needs scope" in cleanup.text
        assert http.delete("/v1/retention-policies/not-a-uuid").status_code == 422
        assert http.delete("/v1/legal-holds/lh_..%2F").status_code in (404, 422)


def test_holds_are_isolated_per_tenant_and_idempotent(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    with tenant.stack.http(tenant.admin_key) as http:
        key = {"Idempotency-Key": f"hold-{uuid.uuid4()}"}
        body = {"scope": "entity", "scope_ref": "ent_acme", "reason": "investigation"}
        first = http.post("/v1/legal-holds", json=body, headers=key)
        replay = http.post("/v1/legal-holds", json=body, headers=key)
        assert (first.status_code, replay.status_code) == (201, 201)
        assert replay.headers["Idempotent-Replayed"] == "true"
        assert replay.json()["id"] == first.json()["id"]
        hold_id = first.json()["id"]
        assert hold_id.startswith("lh_")
        assert [h["id"] for h in http.get("/v1/legal-holds").json()["items"]] == [hold_id]
    with tenant.stack.http(other.admin_key) as http:
        assert http.get("/v1/legal-holds").json()["items"] == []
        missing = http.delete(f"/v1/legal-holds/{hold_id}")
        assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    with tenant.stack.http(tenant.admin_key) as http:
        lifted = http.delete(f"/v1/legal-holds/{hold_id}").json()
        assert (lifted["active"], lifted["scope_ref"]) == (False, "ent_acme")
        assert lifted["lifted_by"].startswith("key:")


def test_a_held_memory_delete_answers_409_over_http(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/memories/user/u-7/k", json={"value": 1}).status_code == 200
        hold_id = http.post("/v1/legal-holds", json={"user_id": "u-7",
                                                     "reason": "litigation"}).json()["id"]
        refused = http.delete("/v1/memories/user/u-7/k")
        assert refused.status_code == 409
        assert refused.json() == {
            "error": "legal_hold", "hold_id": hold_id, "reason": "litigation",
            "detail": f"this memory is under legal hold {hold_id} (litigation); a compliance "
                      f"officer must lift the hold (DELETE /v1/legal-holds/{hold_id}) first"}
        erase = http.post("/v1/subjects/u-7/erase", json={})
        assert (erase.status_code, erase.json()["error"]) == (409, "legal_hold")
        assert hold_id in erase.json()["detail"]
        http.delete(f"/v1/legal-holds/{hold_id}")
        assert http.delete("/v1/memories/user/u-7/k").status_code == 204


def test_a_retention_run_is_a_job(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        started = http.post("/v1/retention/run", json={"dry_run": True})
        assert started.status_code == 202
        job = started.json()
        assert (job["kind"], job["state"]) == ("retention", "queued")
        assert http.get(f"/v1/jobs/{job['id']}").json()["kind"] == "retention"


def test_search_leaves_out_what_a_policy_has_made_due(tenant: Tenant) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from control_plane.db.base import utcnow
    from control_plane.db.models import MemoryPointer
    from control_plane.search import indexer

    runtime = tenant.stack.runtime
    with tenant.stack.http(tenant.admin_key) as http:
        for key, text in (("old", "The dog is called Biscuit."),
                          ("new", "The dog is afraid of thunder.")):
            assert http.put(f"/v1/memories/user/u-s/{key}",
                            json={"value": text}).status_code == 200
        with runtime.sessions() as session:
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        with runtime.engine.begin() as conn:
            conn.execute(update(MemoryPointer).where(
                MemoryPointer.tenant_id == tenant.id, MemoryPointer.key == "old")
                .values(updated_at=utcnow() - timedelta(days=100)))

        def found() -> set[str]:
            answer = http.post("/v1/search", json={"query": "dog", "scope": "user",
                                                   "scope_ref": "u-s", "limit": 10})
            assert answer.status_code == 200, answer.text
            return {r["key"] for r in answer.json()["results"]}

        assert found() == {"old", "new"}
        http.put("/v1/retention-policies", json={"scope": "user", "retention_days": 90,
                                                 "auto_delete": True})
        assert found() == {"new"}
