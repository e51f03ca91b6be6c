"""Teams (``/v1/teams``): admin keys manage them; a scoped agent key of a member reads and
writes the team's memory without a grant, and loses it on its very next request once removed
(membership is read from the database, never from the key cache). Live server, SQLite and
PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.db.models import AccessLog
from control_plane.search import indexer
from control_plane.teams.api import team_ids_of
from tests.support.service import Tenant

BOT = "support-bot"


def _agent_key(tenant: Tenant, agent_id: str = BOT) -> str:
    """A scoped agent key: its own agent scope only; teams come from membership."""
    with tenant.client() as admin:
        return admin.keys.create(role="agent", name=agent_id, agent_id=agent_id,
                                 scopes=[("agent", agent_id)]).api_key


def _http(tenant: Tenant, key: str | None = None) -> httpx.Client:
    return tenant.stack.http(key or tenant.admin_key)


def _put_team(tenant: Tenant, team_id: str, agents: list[str], **body: Any) -> Any:
    with _http(tenant) as http:
        return http.put(f"/v1/teams/{team_id}", json={"agents": agents} | body)


def test_teams_are_created_replaced_listed_read_and_deleted_with_audit_rows(
        tenant: Tenant) -> None:
    made = _put_team(tenant, "support", ["triage-bot", BOT, BOT], name="Support")
    assert made.status_code == 200, made.text
    team = made.json()
    assert (team["team_id"], team["name"], team["agents"]) == ("support", "Support",
                                                               [BOT, "triage-bot"])
    assert _put_team(tenant, "sales", []).json()["agents"] == []
    replaced = _put_team(tenant, "support", ["triage-bot"]).json()
    assert (replaced["name"], replaced["agents"]) == (None, ["triage-bot"])
    assert replaced["created_at"] == team["created_at"]
    with _http(tenant) as http:
        assert http.get("/v1/teams/support").json() == replaced
        page = http.get("/v1/teams", params={"limit": 1}).json()
        assert [t["team_id"] for t in page["items"]] == ["sales"]
        rest = http.get("/v1/teams", params={"cursor": page["next_cursor"]}).json()
        assert ([t["team_id"] for t in rest["items"]], rest["next_cursor"]) == (["support"],
                                                                                None)
        bad = http.put("/v1/teams/x", json={"agents": [""]})
        assert bad.status_code == 422
        assert http.put("/v1/teams/x", json={"agents": [], "extra": 1}).status_code == 422
        assert http.delete("/v1/teams/sales").status_code == 204
        gone = http.get("/v1/teams/sales")
        assert (gone.status_code, gone.json()) == (404, {
            "error": "not_found",
            "detail": "no team 'sales'; create it with PUT /v1/teams/{team_id}"})
        assert http.delete("/v1/teams/sales").status_code == 404
    # Another tenant sees none of it, and may not touch it.
    other = tenant.stack.new_tenant()
    with _http(other) as http:
        assert http.get("/v1/teams/support").status_code == 404
        assert http.delete("/v1/teams/support").status_code == 404
        assert http.get("/v1/teams").json() == {"items": [], "next_cursor": None}
    with Session(tenant.stack.engine) as session:
        rows = session.execute(select(AccessLog.operation, AccessLog.success, AccessLog.detail)
                               .where(AccessLog.tenant_id == tenant.id,
                                      AccessLog.operation.in_(("team_update", "team_delete")))
                               .order_by(AccessLog.id)).all()
    assert [tuple(r) for r in rows] == [
        ("team_update", True, "team support: 2 member agent(s)"),
        ("team_update", True, "team sales: 0 member agent(s)"),
        ("team_update", True, "team support: 1 member agent(s)"),
        ("team_delete", True, "team sales"),
        ("team_delete", False, "team sales not_found: no team 'sales'; create it with PUT "
                               "/v1/teams/{team_id}"),
    ]


def test_agents_read_only_their_own_teams_and_may_not_change_them(tenant: Tenant) -> None:
    _put_team(tenant, "support", [BOT])
    _put_team(tenant, "sales", ["sales-bot"])
    key = _agent_key(tenant)
    with _http(tenant, key) as http:
        assert [t["team_id"] for t in http.get("/v1/teams").json()["items"]] == ["support"]
        assert http.get("/v1/teams/support").json()["agents"] == [BOT]
        assert http.get("/v1/teams/sales").status_code == 404
        denied = http.put("/v1/teams/support", json={"agents": [BOT, "me-too"]})
        assert denied.status_code == 403
        assert http.delete("/v1/teams/support").status_code == 403
    with _http(tenant, tenant.key("compliance")) as http:
        assert [t["team_id"] for t in http.get("/v1/teams").json()["items"]] == ["sales",
                                                                                "support"]
    with tenant.stack.runtime.sessions() as session:
        assert team_ids_of(session, tenant.id, BOT) == ["support"]
        assert team_ids_of(session, tenant.id, "nobody") == []


def test_a_member_reads_and_writes_team_memory_and_a_removed_one_is_out_at_once(
        tenant: Tenant) -> None:
    _put_team(tenant, "support", [BOT, "triage-bot"])
    with _http(tenant) as admin:
        assert admin.put("/v1/memories/team/support/outage",
                         json={"value": "Email outage in progress"}).status_code == 200
        assert admin.put("/v1/memories/team/sales/quota",
                         json={"value": "secret quota"}).status_code == 200
    key = _agent_key(tenant)
    with _http(tenant, key) as http:
        read = http.get("/v1/memories/team/support/outage")
        assert read.status_code == 200, read.text
        assert read.json()["value"] == "Email outage in progress"
        wrote = http.put("/v1/memories/team/support/handover", json={"value": "call Bo"})
        assert wrote.status_code == 200, wrote.text
        assert wrote.json()["agent_id"] == BOT
        appended = http.post("/v1/memories/team/support/log/append", json={"value": "a"})
        assert appended.status_code == 200, appended.text
        # Not a member of sales: as if it were missing.
        assert http.get("/v1/memories/team/sales/quota").status_code == 404
        assert http.put("/v1/memories/team/sales/x", json={"value": 1}).status_code == 403
        listed = http.get("/v1/pointers", params={"scope": "team"}).json()["items"]
        assert sorted((p["scope_ref"], p["key"]) for p in listed) == [
            ("support", "handover"), ("support", "log"), ("support", "outage")]
        event = http.post("/v1/events", json={"scope": "team", "scope_ref": "support",
                                              "kind": "note", "body": "outage noted"})
        assert event.status_code == 201, event.text
        assert http.post("/v1/events", json={"scope": "team", "scope_ref": "sales",
                                             "kind": "note", "body": "x"}).status_code == 403
        assert [e["scope_ref"] for e in http.get("/v1/events").json()["items"]] == ["support"]
        entry = http.post("/v1/entries", json={"scope": "team", "scope_ref": "support",
                                               "title": "Runbook", "summary": "restart"})
        assert entry.status_code == 201, entry.text
        entry_id = entry.json()["id"]
        assert http.get(f"/v1/entries/{entry_id}").status_code == 200

        # The admin removes the bot; the key is cached, the very next request is refused.
        assert _put_team(tenant, "support", ["triage-bot"]).status_code == 200
        gone = http.get("/v1/memories/team/support/outage")
        assert (gone.status_code, gone.json()["detail"]) == (
            404, "no memory at team/support key=outage")
        assert http.put("/v1/memories/team/support/handover",
                        json={"value": "x"}).status_code == 403
        assert http.get("/v1/pointers", params={"scope": "team"}).json()["items"] == []
        assert http.get("/v1/events").json()["items"] == []
        assert http.get(f"/v1/entries/{entry_id}").status_code == 404
        assert http.get("/v1/entries").json()["items"] == []
        # Its own agent scope still works.
        assert http.put(f"/v1/memories/agent/{BOT}/k", json={"value": 1}).status_code == 200


def test_search_finds_team_memory_only_for_members(tenant: Tenant) -> None:
    _put_team(tenant, "support", [BOT])
    with _http(tenant) as admin:
        for scope, ref in (("team", "support"), ("team", "sales"), ("agent", "other-bot")):
            assert admin.put(f"/v1/memories/{scope}/{ref}/outage", json={
                "value": f"Email outage in progress ({ref})"}).status_code == 200
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
    key = _agent_key(tenant)
    with _http(tenant, key) as http:
        found = http.post("/v1/search", json={"query": "email outage"}).json()["results"]
        assert [(r["scope"], r["scope_ref"]) for r in found] == [("team", "support")]
        _put_team(tenant, "support", [])
        assert http.post("/v1/search", json={"query": "email outage"}).json()["results"] == []
        refused = http.post("/v1/search", json={"query": "email outage", "scope": "team",
                                                "scope_ref": "support"})
        assert refused.status_code == 404
