"""Importance as a retention priority, on SQLite and PostgreSQL: a policy's and a cleanup's
``keep_importance_at_least`` keeps memories and entries of that importance or more whatever
their age (the run neither deletes nor hides them); bad values are refused with a sentence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from control_plane.db.base import utcnow
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.retention import cleanup
from control_plane.retention.schemas import CleanupIn, CleanupOut
from tests.retention.helpers import objects, pointers, policy, put, run
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld, Tenant


def test_a_policy_keeps_what_is_important_enough(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    policy(world, scope="user", retention_days=30, auto_delete=True,
           keep_importance_at_least=4)
    trivial = put(world, "user", "u1", "weather", importance=2)
    put(world, "user", "u1", "allergy", importance=5)
    put(world, "user", "u1", "budget", importance=4)
    put(world, "user", "u1", "default")  # importance 3
    clock.advance(31 * 86400)
    dry = run(world, clock(), dry_run=True)
    assert (dry["policies"][0]["due"], dry["deleted"]) == (2, 0)
    result = run(world, clock())
    assert (result["policies"][0]["deleted"], result["deleted"]) == (2, 2)
    assert set(pointers(world)) == {"allergy", "budget"}
    assert trivial.storage_path not in objects(world, "memories")


def _cleanup(world: ServiceWorld, now: Any, **body: Any) -> CleanupOut:
    with world.runtime.sessions() as session:
        result = cleanup.cleanup(session, world.runtime.plane, world.actor,
                                 CleanupIn.model_validate(body), now=now)
    assert isinstance(result, CleanupOut)
    return result


def test_a_cleanup_keeps_what_is_important_enough(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    put(world, "agent", "bot", "incident", importance=5, agent_id="bot")
    put(world, "agent", "bot", "chatter", importance=3, agent_id="bot")
    put(world, "agent", "bot", "preferences", importance=1, agent_id="bot")
    clock.advance(181 * 86400)
    body = {"agent_id": "bot", "older_than_days": 180, "exclude_keys": ["preferences"],
            "keep_importance_at_least": 5}
    dry = _cleanup(world, clock(), dry_run=True, **body)
    assert (dry.matched, dry.excluded, dry.important, dry.held) == (1, 1, 1, 0)
    assert [i.key for i in dry.items or []] == ["chatter"]
    done = _cleanup(world, clock(), **body)
    assert (done.matched, done.deleted, done.excluded, done.important) == (1, 1, 1, 1)
    assert set(pointers(world)) == {"incident", "preferences"}
    with world.runtime.sessions() as session:
        details = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "cleanup")).all()
    assert details == ["dry run: 1 would be deleted, 0 held, 1 excluded, 1 important",
                       "1 deleted, 0 held, 1 excluded, 1 important"]


def test_lists_keep_showing_important_memories_and_entries_past_retention(
        tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for key, importance in (("weather", 2), ("allergy", 5)):
            assert http.put(f"/v1/memories/user/u1/{key}", json={
                "value": key, "importance": importance}).status_code in (200, 201)
        entry = http.post("/v1/entries", json={
            "scope": "user", "scope_ref": "u1", "title": "Decision",
            "summary": "Agreed to renew.", "importance": 5})
        assert entry.status_code == 201, entry.text
        answer = http.put("/v1/retention-policies", json={
            "scope": "user", "retention_days": 30, "auto_delete": True,
            "keep_importance_at_least": 5})
        assert (answer.status_code, answer.json()["keep_importance_at_least"]) == (200, 5)
        with tenant.stack.runtime.sessions() as session:
            session.execute(update(MemoryPointer).where(
                MemoryPointer.tenant_id == tenant.id, MemoryPointer.scope_ref == "u1")
                .values(updated_at=utcnow() - timedelta(days=40)))
            session.commit()
        listed = http.get("/v1/pointers", params={"scope": "user", "scope_ref": "u1"})
        assert sorted(p["key"] or p["id"] for p in listed.json()["items"]) == sorted(
            ["allergy", entry.json()["id"]])
        audit = http.get("/v1/audit", params={"operation": "retention_policy_write"}).json()
        assert audit["items"][0]["detail"].endswith(
            "auto_delete=True keep_importance_at_least=5")


def test_an_importance_out_of_range_is_refused_with_a_sentence(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for bad in (0, 6, "high"):
            for path, body in (
                    ("/v1/retention-policies", {"scope": "user", "retention_days": 30,
                                                "auto_delete": True}),
                    ("/v1/cleanup", {"older_than_days": 30, "dry_run": True})):
                method = http.put if path.endswith("policies") else http.post
                answer = method(path, json={**body, "keep_importance_at_least": bad})
                assert answer.status_code == 422, answer.text
                assert answer.json()["error"] == "validation_error"
                assert "keep_importance_at_least" in answer.json()["detail"]
        assert http.get("/v1/retention-policies").json()["items"] == []
