"""Scoped agent keys: a key with an access list sees only its scopes; a read of anything else
answers 404 exactly as a missing memory does, and a write or delete there answers 403 saying
the key's scopes do not include it (whether anything is stored there or not). Audit rows
record who acted: agent keys as ``agent`` with their agent id, admin and compliance keys as
``api``, the service itself as ``system``.

Every test runs against a live server on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

import memplane
from tests.support.service import Tenant

# What the tenant holds before the scoped key acts: (scope, scope_ref) -> value at key "k".
SEEDED = {
    ("agent", "support-bot"): "own notes",
    ("agent", "other-bot"): "other agent's notes",
    ("team", "T123"): "team notes",
    ("team", "T999"): "another team's notes",
    ("user", "u1"): "u1 prefers email",
    ("user", "u2"): "u2 prefers phone",
    ("tenant", "-"): "company policy",
    ("conversation", "c1"): "a conversation",
}
INSIDE = [("agent", "support-bot"), ("team", "T123"), ("user", "u1"), ("user", "u2")]
# ``institutional`` is the tenant scope under its other name: outside too.
OUTSIDE = [("agent", "other-bot"), ("team", "T999"), ("tenant", "-"), ("institutional", "-"),
           ("conversation", "c1")]
GRANTS = [{"scope": "agent", "scope_ref": "support-bot"}, {"scope": "team", "scope_ref": "T123"},
          {"scope": "user", "scope_ref": "*"}]


def _seed(tenant: Tenant) -> None:
    with tenant.client() as admin:
        for (scope, ref), value in SEEDED.items():
            admin.memory.set(scope=scope, scope_ref=ref, key="k", value=value)


def _scoped_key(tenant: Tenant, **extra: Any) -> memplane.CreatedKey:
    with tenant.client() as admin:
        return admin.keys.create(role="agent", name="support bot", scopes=GRANTS,
                                 agent_id="support-bot", **extra)


def _canonical(scope: str) -> str:
    return "tenant" if scope == "institutional" else scope


def _missing(scope: str, ref: str, key: str | None = None) -> dict[str, str]:
    where = f"{_canonical(scope)}/{ref}" + (f" key={key}" if key else "")
    return {"error": "not_found", "detail": f"no memory at {where}"}


def _outside(scope: str, ref: str) -> dict[str, str]:
    return {"error": "forbidden",
            "detail": f"this key's scopes do not include {_canonical(scope)}/{ref}: write "
                      f"there with a key whose scopes list it (an admin sets a key's scopes "
                      f"when creating it)"}


def _all_pointers(tenant: Tenant) -> set[tuple[str, str, str | None]]:
    with tenant.stack.http(tenant.admin_key) as http:
        items = http.get("/v1/pointers", params={"limit": 1000}).json()["items"]
    return {(p["scope"], p["scope_ref"], p["key"]) for p in items}


def test_key_creation_answers_with_its_access_list(tenant: Tenant) -> None:
    created = _scoped_key(tenant)
    assert created.role == "agent"
    assert created.agent_id == "support-bot"
    assert created.scopes == GRANTS


def test_scoped_key_matrix_of_memory_routes(tenant: Tenant) -> None:
    _seed(tenant)
    key = _scoped_key(tenant).api_key
    seen: dict[tuple[str, str, str], tuple[int, Any]] = {}
    with tenant.stack.http(key) as http:
        for scope, ref in INSIDE + OUTSIDE:
            base = f"/v1/memories/{scope}/{ref}"
            for name, request in [
                ("get", lambda b=base: http.get(f"{b}/k")),
                ("get_missing", lambda b=base: http.get(f"{b}/nothing-here")),
                ("put", lambda b=base: http.put(f"{b}/new", json={"value": "written"})),
                ("append", lambda b=base: http.post(f"{b}/log/append", json={"value": 1})),
                ("delete", lambda b=base: http.delete(f"{b}/k")),
                ("delete_missing", lambda b=base: http.delete(f"{b}/nothing-here")),
                ("clear", lambda b=base: http.delete(b)),
            ]:
                answer = request()
                body = answer.json() if answer.content else None
                seen[(scope, ref, name)] = (answer.status_code, body)

    for scope, ref in INSIDE:
        assert seen[(scope, ref, "get")][0] == 200
        assert seen[(scope, ref, "get")][1]["value"] == SEEDED[(scope, ref)]
        assert seen[(scope, ref, "get_missing")] == (404, _missing(scope, ref, "nothing-here"))
        assert seen[(scope, ref, "put")][0] == 200
        assert seen[(scope, ref, "put")][1]["agent_id"] == "support-bot"
        assert seen[(scope, ref, "append")][0] == 200
        assert seen[(scope, ref, "append")][1]["agent_id"] == "support-bot"
        assert seen[(scope, ref, "delete")] == (204, None)
        assert seen[(scope, ref, "delete_missing")] == (404,
                                                        _missing(scope, ref, "nothing-here"))
        # "k" is gone already; "new" and "log" were written just before.
        assert seen[(scope, ref, "clear")] == (200, {"deleted": 2})
    for scope, ref in OUTSIDE:
        # Existing or not, a read outside answers exactly what a missing memory answers; a
        # write or delete says the key's scopes do not include the scope, existing or not.
        for name, key in [("get", "k"), ("get_missing", "nothing-here")]:
            assert seen[(scope, ref, name)] == (404, _missing(scope, ref, key)), (scope, name)
        for name in ("put", "append", "delete", "delete_missing", "clear"):
            assert seen[(scope, ref, name)] == (403, _outside(scope, ref)), (scope, name)

    # Nothing outside was written, deleted or cleared; everything inside was cleared.
    outside = {(s, r) for s, r in SEEDED if (s, r) not in INSIDE}
    assert _all_pointers(tenant) == {(s, r, "k") for s, r in outside}
    with tenant.client() as admin:
        for scope, ref in outside:
            assert admin.memory.get(scope=scope, scope_ref=ref, key="k").value == \
                SEEDED[(scope, ref)]


def test_scoped_key_lists_only_its_scopes(tenant: Tenant) -> None:
    _seed(tenant)
    key = _scoped_key(tenant).api_key

    def listed(http: httpx.Client, **params: Any) -> list[tuple[str, str, str]]:
        answer = http.get("/v1/pointers", params=params)
        assert answer.status_code == 200, answer.text
        return sorted((p["scope"], p["scope_ref"], p["key"]) for p in answer.json()["items"])

    inside = sorted((s, r, "k") for s, r in INSIDE)
    with tenant.stack.http(key) as http:
        assert listed(http) == inside
        assert listed(http, scope="team") == [("team", "T123", "k")]
        assert listed(http, scope="team", scope_ref="T999") == []
        assert listed(http, scope="agent", scope_ref="support-bot") == [
            ("agent", "support-bot", "k")]
        assert listed(http, scope="agent", scope_ref="other-bot") == []
        assert listed(http, scope="tenant") == []
        assert listed(http, scope="institutional") == []
        assert listed(http, scope="conversation") == []
        assert listed(http, scope="user") == [("user", "u1", "k"), ("user", "u2", "k")]
        assert listed(http, user_id="u2") == [("user", "u2", "k")]
        assert listed(http, memory_type="agent_memory") == [("agent", "support-bot", "k")]
        assert listed(http, sync_status="synced") == inside
        # Paging through one at a time sees the same set, nothing more.
        walked: list[tuple[str, str, str]] = []
        cursor = None
        while True:
            page = http.get("/v1/pointers", params={"limit": 1} | (
                {"cursor": cursor} if cursor else {})).json()
            walked += [(p["scope"], p["scope_ref"], p["key"]) for p in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(walked) == inside
    # The admin key still sees the whole tenant.
    assert _all_pointers(tenant) == {(s, r, "k") for s, r in SEEDED}


def test_institutional_grant_and_any_ref_grant(tenant: Tenant) -> None:
    _seed(tenant)
    with tenant.client() as admin:
        tenant_only = admin.keys.create(role="agent", name="policy reader",
                                        scopes=[("institutional", "-")]).api_key
        any_agent = admin.keys.create(role="agent", name="all agents",
                                      scopes=[{"scope": "agent", "scope_ref": "*"}]).api_key
    with tenant.stack.http(tenant_only) as http:
        assert http.get("/v1/memories/tenant/-/k").json()["value"] == "company policy"
        assert http.get("/v1/memories/institutional/-/k").json()["value"] == "company policy"
        assert http.get("/v1/memories/agent/support-bot/k").status_code == 404
        assert [p["scope"] for p in http.get("/v1/pointers").json()["items"]] == ["tenant"]
    with tenant.stack.http(any_agent) as http:
        assert http.get("/v1/memories/agent/other-bot/k").json()["value"] == \
            "other agent's notes"
        assert http.get("/v1/memories/team/T123/k").status_code == 404
        assert sorted(p["scope_ref"] for p in http.get("/v1/pointers").json()["items"]) == [
            "other-bot", "support-bot"]
        # No agent id on this key: writes carry what the body says, or nothing.
        written = http.put("/v1/memories/agent/new-bot/k", json={"value": 1, "agent_id": "x"})
        assert (written.status_code, written.json()["agent_id"]) == (200, "x")


def test_agent_id_of_the_key_is_recorded_and_another_is_refused(tenant: Tenant) -> None:
    key = _scoped_key(tenant).api_key
    with tenant.stack.http(key) as http:
        first = http.put("/v1/memories/user/u1/k", json={"value": 1})
        again = http.put("/v1/memories/user/u1/k", json={"value": 2})  # the one-statement path
        same = http.put("/v1/memories/user/u1/k", json={"value": 3, "agent_id": "support-bot"},
                        headers={"Idempotency-Key": "w-1"})
        other = http.put("/v1/memories/user/u1/k", json={"value": 4, "agent_id": "other-bot"})
        appended = http.post("/v1/memories/team/T123/log/append",
                             json={"value": 1, "agent_id": "other-bot"})
        current = http.get("/v1/memories/user/u1/k").json()
    assert [first.status_code, again.status_code, same.status_code] == [200, 200, 200]
    assert [a.json()["agent_id"] for a in (first, again, same)] == ["support-bot"] * 3
    for refused in (other, appended):
        assert refused.status_code == 403
        assert refused.json() == {
            "error": "forbidden",
            "detail": "this key writes as agent 'support-bot'; leave agent_id out or send "
                      "that one"}
    assert (current["value"], current["pointer"]["version"]) == (3, 3)


def test_roles_still_apply_to_scoped_keys(tenant: Tenant) -> None:
    key = _scoped_key(tenant).api_key
    with tenant.stack.http(key) as http:
        assert http.get("/v1/audit").status_code == 403
        assert http.post("/v1/api-keys", json={"role": "agent"}).status_code == 403
        assert http.post("/v1/subjects/u1/erase", json={}).status_code == 403


@pytest.mark.parametrize(("body", "detail"), [
    ({"role": "admin", "scopes": GRANTS},
     "only agent keys take scopes and an agent_id; a admin key always sees the whole tenant, "
     "so leave both out or use role 'agent'"),
    ({"role": "compliance", "agent_id": "bot"},
     "only agent keys take scopes and an agent_id; a compliance key always sees the whole "
     "tenant, so leave both out or use role 'agent'"),
    ({"role": "agent", "scopes": []},
     "scopes must name at least one scope; leave it out for a key that sees the whole tenant"),
    ({"role": "agent", "scopes": [{"scope": "tenant", "scope_ref": "acme"}]},
     "the tenant (institutional) scope has the one scope_ref '-'; use it instead of 'acme'"),
])
def test_access_lists_that_make_no_sense_are_refused(tenant: Tenant, body: dict[str, Any],
                                                     detail: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.post("/v1/api-keys", json=body | {"name": "x"})
    assert answer.status_code == 422
    assert answer.json() == {"error": "validation_error", "detail": detail}


def test_malformed_access_list_is_a_422(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        unknown = http.post("/v1/api-keys", json={"role": "agent", "scopes": [
            {"scope": "galaxy", "scope_ref": "x"}]})
        no_ref = http.post("/v1/api-keys", json={"role": "agent", "scopes": [{"scope": "team"}]})
    assert (unknown.status_code, no_ref.status_code) == (422, 422)
    assert "scope" in unknown.json()["detail"]


def test_audit_records_accessor_type_and_agent_id(tenant: Tenant) -> None:
    scoped = _scoped_key(tenant)
    with tenant.client() as admin:
        plain_agent = admin.keys.create(role="agent", name="plain agent")
        officer = admin.keys.create(role="compliance", name="officer")
        admin.memory.set(scope="team", scope_ref="T999", key="k", value=0)
        admin_row_id = admin.memory.set(scope="team", scope_ref="T123", key="k", value=0).id
    with tenant.stack.http(scoped.api_key) as http:
        written = http.put("/v1/memories/team/T123/k", json={"value": 1}).json()
        assert http.put("/v1/memories/team/T123/k", json={"value": 2}).status_code == 200
        assert http.get("/v1/memories/team/T123/k").status_code == 200
        assert http.get("/v1/memories/team/T999/k").status_code == 404
        refused = http.put("/v1/memories/team/T999/k", json={"value": 3})
        assert refused.status_code == 403, refused.text
        assert http.get("/v1/pointers").status_code == 200
    with tenant.stack.http(plain_agent.api_key) as http:
        assert http.get("/v1/memories/team/T999/k").status_code == 200
    with tenant.stack.http(officer.api_key) as http:
        assert http.get("/v1/memories/team/T999/k").status_code == 200

    with tenant.stack.http(tenant.admin_key) as http:
        def rows(**params: Any) -> list[tuple[Any, ...]]:
            items = http.get("/v1/audit", params=params | {"limit": 1000}).json()["items"]
            return [(i["accessor_type"], i["agent_id"], i["operation"], i["success"],
                     i["pointer_id"]) for i in items]

        assert written["id"] == str(admin_row_id)
        assert rows(accessor_id=f"key:{scoped.id}") == [
            ("agent", "support-bot", "write", True, written["id"]),
            ("agent", "support-bot", "write", True, written["id"]),
            ("agent", "support-bot", "read", True, written["id"]),
            ("agent", "support-bot", "read", False, None),
            ("agent", "support-bot", "write", False, None),  # one row for the refusal
            ("agent", "support-bot", "list", True, None),
        ]
        denied = http.get("/v1/audit", params={"accessor_id": f"key:{scoped.id}",
                                                "operation": "read"}).json()["items"][1]
        assert denied["detail"] == "team memory outside the key's scopes"
        assert [r[:4] for r in rows(accessor_id=f"key:{plain_agent.id}")] == [
            ("agent", None, "read", True)]
        assert [r[:4] for r in rows(accessor_id=f"key:{officer.id}")] == [
            ("api", None, "read", True)]
        admin_rows = rows(operation="write")
        assert [r[:2] for r in admin_rows] == [("api", None), ("api", None),
                                               ("agent", "support-bot"),
                                               ("agent", "support-bot"),
                                               ("agent", "support-bot")]
        system_rows = rows(operation="tenant_create")
        assert [r[:4] for r in system_rows] == [("system", None, "tenant_create", True)]
    # The agent id is part of each row's hash: the sealed rows hash with it, and would not
    # without it.
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from control_plane.audit.service import chain_hash
    from control_plane.db.models import AccessLog

    with Session(tenant.stack.engine) as session:
        sealed = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == tenant.id, AccessLog.accessor_id == f"key:{scoped.id}")
            .order_by(AccessLog.seq)).all()
        assert [r.agent_id for r in sealed] == ["support-bot"] * 6
        for row in sealed:
            assert row.prev_hash is not None
            assert chain_hash(row.prev_hash, row) == row.row_hash
            row.agent_id = None
            assert chain_hash(row.prev_hash, row) != row.row_hash
        session.rollback()


def test_a_cached_key_keeps_its_access_list(tenant: Tenant) -> None:
    from control_plane.identity import CALLERS

    _seed(tenant)
    created = _scoped_key(tenant)
    with tenant.stack.http(created.api_key) as http:
        assert http.get("/v1/memories/team/T123/k").status_code == 200
        cached = [c for (_, c, _) in CALLERS._items.values() if c.key_id == uuid.UUID(created.id)]
        assert len(cached) == 1
        assert cached[0].may_access("team", "T123") is True
        assert cached[0].may_access("team", "T999") is False
        # Answered from the cache now: still scoped.
        assert http.get("/v1/memories/team/T999/k").status_code == 404
        assert http.get("/v1/memories/team/T123/k").status_code == 200


def test_sdk_scoped_key_gets_not_found_outside(tenant: Tenant) -> None:
    _seed(tenant)
    with tenant.client() as admin:
        created = admin.keys.create(role="agent", name="sdk", scopes=[("team", "T123")],
                                    agent_id="sdk-bot")
    with tenant.stack.client(created.api_key) as agent:
        assert agent.memory.get(scope="team", scope_ref="T123", key="k").value == "team notes"
        with pytest.raises(memplane.NotFound):
            agent.memory.get(scope="team", scope_ref="T999", key="k")
        pointer = agent.memory.set(scope="team", scope_ref="T123", key="k2", value=1)
    assert pointer.agent_id == "sdk-bot"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_async_sdk_creates_scoped_keys(tenant: Tenant) -> None:
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as admin:
        created = await admin.keys.create(role="agent", name="async", agent_id="a-bot",
                                          scopes=[("user", "*")])
    assert (created.agent_id, created.scopes) == ("a-bot", [{"scope": "user", "scope_ref": "*"}])


@pytest.mark.databases("sqlite")
def test_cli_creates_a_scoped_key(tmp_path: Path, database: str) -> None:
    from typer.testing import CliRunner

    from control_plane.identity import authenticate
    from control_plane.runtime import Runtime
    from control_plane.settings import Settings
    from memplane.cli import app

    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    assert runner.invoke(app, ["--init", "db", "upgrade"], env=env).exit_code == 0
    made = runner.invoke(app, ["keys", "create", "--role", "agent", "--scope", "team/T123",
                               "--scope", "user/*", "--agent-id", "cli-bot"], env=env)
    bad = runner.invoke(app, ["keys", "create", "--role", "agent", "--scope", "galaxy/x"],
                        env=env)
    assert made.exit_code == 0, made.output
    assert bad.exit_code == 2
    assert "'galaxy/x' is not scope/scope_ref" in bad.output
    runtime = Runtime(Settings(data_dir=tmp_path / "data"))
    try:
        with runtime.sessions() as session:
            caller = authenticate(session, f"Bearer {made.output.strip().splitlines()[-1]}")
    finally:
        runtime.close()
    assert caller.access.agent_id == "cli-bot"
    assert [caller.may_access(s, r) for s, r in [("team", "T123"), ("team", "T9"),
                                                 ("user", "anyone"), ("agent", "cli-bot")]] == [
        True, False, True, False]
