"""A data subject's own key (role ``user``): it reads, writes, lists, searches and exports
only its subject's memories — the ``user`` scope of the subject, and whatever names the
subject as user id, in any scope — never erases, manages nothing, and is audited as
``user``. Live server, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

import memplane
from control_plane.db.models import AccessLog
from control_plane.search import indexer
from tests.support.service import Tenant

# (scope, scope_ref, key) -> user_id written with it (None: none given).
WRITTEN: dict[tuple[str, str, str], str | None] = {
    ("user", "alice", "pref"): None,
    ("user", "bob", "pref"): None,
    ("agent", "support-bot", "alice-device"): "alice",
    ("agent", "support-bot", "bob-device"): "bob",
    ("agent", "support-bot", "general"): None,
    ("team", "support", "alice-ticket"): "alice",
    ("team", "support", "bob-ticket"): "bob",
    ("tenant", "-", "policy"): None,
}
ALICES = {("user", "alice", "pref"), ("agent", "support-bot", "alice-device"),
          ("team", "support", "alice-ticket")}


def _seed(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for (scope, ref, key), user in WRITTEN.items():
            body: dict[str, Any] = {"value": f"printer trouble note {key} of {ref}"}
            if user is not None:
                body["user_id"] = user
            assert http.put(f"/v1/memories/{scope}/{ref}/{key}", json=body).status_code == 200
        for scope, ref, user in (("user", "alice", None), ("agent", "support-bot", "alice"),
                                 ("agent", "support-bot", "bob"), ("team", "support", None)):
            body = {"scope": scope, "scope_ref": ref, "kind": "note", "body": f"{scope} {user}"}
            if user is not None:
                body["user_id"] = user
            assert http.post("/v1/events", json=body).status_code == 201
        for ref, user in (("support", "alice"), ("support", "bob")):
            assert http.post("/v1/entries", json={
                "scope": "team", "scope_ref": ref, "user_id": user, "title": f"{user} case",
                "summary": "printer trouble"}).status_code == 201


def _user_key(tenant: Tenant, user_id: str = "alice") -> memplane.CreatedKey:
    with tenant.client() as admin:
        return admin.keys.create(role="user", name=f"{user_id}'s own key", user_id=user_id)


def _addresses(items: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(p["scope"], p["scope_ref"], p["key"]) for p in items if p["key"] is not None}


def test_key_creation_takes_a_user_id_for_user_keys_only(tenant: Tenant) -> None:
    created = _user_key(tenant)
    assert (created.role, created.user_id, created.agent_id, created.scopes) == (
        "user", "alice", None, None)
    with tenant.stack.http(tenant.admin_key) as http:
        missing = http.post("/v1/api-keys", json={"role": "user", "name": "x"})
        assert (missing.status_code, missing.json()["detail"]) == (
            422, "a user key belongs to one data subject: send user_id, the subject's user id")
        other = http.post("/v1/api-keys", json={"role": "agent", "user_id": "alice"})
        assert (other.status_code, other.json()["detail"]) == (
            422, "only user keys take a user_id; a agent key is not a data subject's key, so "
                 "leave user_id out or use role 'user'")
        scoped = http.post("/v1/api-keys", json={"role": "user", "user_id": "alice",
                                                 "scopes": [{"scope": "user",
                                                             "scope_ref": "*"}]})
        assert (scoped.status_code, scoped.json()["detail"]) == (
            422, "a user key sees its own data subject only: leave scopes and agent_id out")


def test_a_user_key_lists_reads_and_searches_only_its_subject(tenant: Tenant) -> None:
    _seed(tenant)
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
    key = _user_key(tenant).api_key
    with tenant.stack.http(key) as http:
        listed = http.get("/v1/pointers", params={"limit": 1000}).json()["items"]
        assert _addresses(listed) == ALICES
        valued = http.get("/v1/pointers", params={"include_values": "true"}).json()["items"]
        assert {(v["pointer"]["scope_ref"], v["value"]) for v in valued} == {
            ("alice", "printer trouble note pref of alice"),
            ("support-bot", "printer trouble note alice-device of support-bot"),
            ("support", "printer trouble note alice-ticket of support")}
        assert http.get("/v1/memories/user/alice/pref").json()["value"] == (
            "printer trouble note pref of alice")
        # The subject's memories in other scopes too, by address; nothing else.
        assert http.get("/v1/memories/agent/support-bot/alice-device").json()["value"] == (
            "printer trouble note alice-device of support-bot")
        for path in ("/v1/memories/user/bob/pref", "/v1/memories/tenant/-/policy",
                     "/v1/memories/agent/support-bot/general",
                     "/v1/memories/agent/support-bot/bob-device",
                     "/v1/memories/agent/support-bot/missing"):
            missing = http.get(path)
            assert (missing.status_code, missing.json()["error"]) == (404, "not_found"), path
        found = http.post("/v1/search", json={"query": "printer trouble", "limit": 50}).json()
        assert {(r["scope"], r["scope_ref"], r["key"]) for r in found["results"]} == (
            ALICES | {("team", "support", None)})
        refused = http.post("/v1/search", json={"query": "printer", "scope": "user",
                                                "scope_ref": "bob"})
        assert refused.status_code == 404
        events = http.get("/v1/events").json()["items"]
        assert sorted((e["scope"], e["user_id"]) for e in events) == [
            ("agent", "alice"), ("user", "alice")]
        for event in events:
            assert http.get(f"/v1/events/{event['id']}").status_code == 200
        entries = http.get("/v1/entries").json()["items"]
        assert [e["title"] for e in entries] == ["alice case"]
        assert http.get(f"/v1/entries/{entries[0]['id']}").status_code == 200
    with tenant.stack.http(tenant.admin_key) as http:
        others = [e["id"] for e in http.get("/v1/events").json()["items"]
                  if e["user_id"] != "alice" and e["scope"] != "user"]
        bobs_entry = [e["id"] for e in http.get("/v1/entries").json()["items"]
                      if e["title"] == "bob case"]
    with tenant.stack.http(key) as http:
        assert [http.get(f"/v1/events/{i}").status_code for i in others] == [404, 404]
        assert http.get(f"/v1/entries/{bobs_entry[0]}").status_code == 404


def test_a_user_key_writes_its_own_user_scope_as_its_subject(tenant: Tenant) -> None:
    key = _user_key(tenant).api_key
    with tenant.stack.http(key) as http:
        wrote = http.put("/v1/memories/user/alice/style", json={"value": "bullet points"})
        assert wrote.status_code == 200, wrote.text
        assert (wrote.json()["user_id"], wrote.json()["agent_id"]) == ("alice", None)
        named = http.put("/v1/memories/user/alice/x", json={"value": 1, "user_id": "bob"})
        assert (named.status_code, named.json()["detail"]) == (
            403, "this key writes for its own data subject only; leave user_id out or send "
                 "'alice'")
        bobs = http.put("/v1/memories/user/bob/x", json={"value": 1})
        assert (bobs.status_code, bobs.json()["detail"]) == (
            403, "this key's scopes do not include user/bob: a user key writes only its own "
                 "data subject's memory (user/alice)")
        assert http.put("/v1/memories/agent/support-bot/x",
                        json={"value": 1, "user_id": "alice"}).status_code == 403
        appended = http.post("/v1/memories/user/alice/log/append", json={"value": "a"})
        assert appended.status_code == 200, appended.text
        event = http.post("/v1/events", json={"scope": "user", "scope_ref": "alice",
                                              "kind": "note", "body": "hello"})
        assert (event.status_code, event.json()["user_id"]) == (201, "alice")
        entry = http.post("/v1/entries", json={"scope": "user", "scope_ref": "alice",
                                               "title": "Mine", "summary": "s"})
        assert (entry.status_code, entry.json()["user_id"]) == (201, "alice")
        deleted = http.delete("/v1/memories/user/alice/style")
        assert deleted.status_code == 403
        assert "role 'user' may not" in deleted.json()["detail"]
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get("/v1/memories/user/alice/style").json()["value"] == "bullet points"


def test_a_user_key_manages_nothing(tenant: Tenant) -> None:
    key = _user_key(tenant).api_key
    with tenant.stack.http(key) as http:
        for method, path, body in [
                ("POST", "/v1/api-keys", {"role": "admin"}),
                ("GET", "/v1/audit", None),
                ("GET", "/v1/teams", None),
                ("PUT", "/v1/agents/a", {}),
                ("PUT", "/v1/retention-policies", {}),
                ("PUT", "/v1/storage/config", {}),
                ("POST", "/v1/cleanup", {}),
                ("POST", "/v1/memories:batch", {"operations": [
                    {"op": "get", "scope": "user", "scope_ref": "alice", "key": "k"}]}),
                ("DELETE", "/v1/memories/user/alice", None)]:
            answer = http.request(method, path, json=body)
            assert answer.status_code == 403, (path, answer.text)


def test_a_user_key_exports_its_own_subject_only_and_never_erases(
        tenant: Tenant, tmp_path: Path) -> None:
    _seed(tenant)
    created = _user_key(tenant)
    with tenant.stack.client(created.api_key) as own:
        job = own.memory.export(user_id="alice")
        assert own.jobs.wait(job.id).state == "completed"
        own.exports.download(job.id, tmp_path / "export.zip")
        with pytest.raises(memplane.NotFound):
            own.memory.export(user_id="bob")
        with pytest.raises(memplane.Forbidden) as erase:
            own.memory.erase_user("alice")
    assert erase.value.detail == (
        "a key with role 'user' may not erase a data subject: erasure is a compliance act, "
        "asked of the tenant's compliance officer; use a key with role admin or compliance")
    with zipfile.ZipFile(tmp_path / "export.zip") as archive:
        manifest = json.loads(archive.read("manifest.json"))
    keys = {i["key"] for i in manifest["items"] if i.get("key")}
    assert {"pref", "alice-device", "alice-ticket"} <= keys
    assert not keys & {"bob-device", "bob-ticket", "general", "policy"}
    with tenant.client() as admin:
        bobs = admin.memory.export(user_id="bob")
        assert admin.jobs.wait(bobs.id).state == "completed"
    with tenant.stack.http(created.api_key) as http:
        assert http.get(f"/v1/jobs/{bobs.id}").status_code == 404
        assert http.get(f"/v1/exports/{bobs.id}/download").status_code == 404
        assert http.get(f"/v1/jobs/{job.id}").status_code == 200


def test_a_user_keys_accesses_are_audited_as_user_without_its_subject(
        tenant: Tenant) -> None:
    created = _user_key(tenant)
    with tenant.stack.http(created.api_key) as http:
        assert http.put("/v1/memories/user/alice/k", json={"value": 1}).status_code == 200
        assert http.get("/v1/memories/user/alice/k").status_code == 200
        assert http.get("/v1/memories/user/bob/k").status_code == 404
        assert http.get("/v1/pointers").status_code == 200
    with Session(tenant.stack.engine) as session:
        rows = session.execute(select(AccessLog.accessor_type, AccessLog.accessor_id,
                                      AccessLog.agent_id, AccessLog.operation,
                                      AccessLog.success, AccessLog.detail)
                               .where(AccessLog.tenant_id == tenant.id,
                                      AccessLog.accessor_id == f"key:{created.id}")
                               .order_by(AccessLog.id)).all()
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        ("user", f"key:{created.id}", None, op, ok)
        for op, ok in (("write", True), ("read", True), ("read", False), ("list", True))]
    assert not any("alice" in r.detail or "bob" in r.detail for r in rows)
    with tenant.stack.http(tenant.admin_key) as http:
        shown = http.get("/v1/audit", params={"accessor_id": f"key:{created.id}"}).json()
    assert {e["accessor_type"] for e in shown["items"]} == {"user"}


def test_the_subjects_erasure_revokes_its_own_key_and_forgets_its_id(tenant: Tenant) -> None:
    from control_plane.db.models import ApiKey

    alice, bob = _user_key(tenant), _user_key(tenant, "bob")
    with tenant.stack.http(alice.api_key) as http:
        assert http.put("/v1/memories/user/alice/k", json={"value": 1}).status_code == 200
    with tenant.client() as admin:
        assert admin.jobs.wait(admin.memory.erase_user("alice").id).state == "completed"
    with tenant.stack.http(alice.api_key) as http:
        assert http.get("/v1/pointers").status_code == 401
    with tenant.stack.http(bob.api_key) as http:
        assert http.get("/v1/pointers").status_code == 200
    with Session(tenant.stack.engine) as session:
        kept = {key_id: user for key_id, user in session.execute(
            select(ApiKey.id, ApiKey.user_id).where(ApiKey.tenant_id == tenant.id,
                                                    ApiKey.role == "user"))}
    assert kept[uuid.UUID(bob.id)] == "bob"
    assert kept[uuid.UUID(alice.id)].startswith("hmac:")


@pytest.mark.databases("sqlite")
def test_the_cli_creates_a_user_key(tmp_path: Path, database: str) -> None:
    from typer.testing import CliRunner

    from control_plane.identity import authenticate
    from control_plane.runtime import Runtime
    from control_plane.settings import Settings
    from memplane.cli import app

    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    assert runner.invoke(app, ["--init", "db", "upgrade"], env=env).exit_code == 0
    made = runner.invoke(app, ["keys", "create", "--role", "user", "--user-id", "alice"],
                         env=env)
    bad = runner.invoke(app, ["keys", "create", "--role", "user"], env=env)
    assert made.exit_code == 0, made.output
    assert bad.exit_code == 2
    said = " ".join(bad.output.replace("│", " ").split())
    assert "a user key belongs to one data subject: send user_id" in said
    runtime = Runtime(Settings(data_dir=tmp_path / "data"))
    try:
        with runtime.sessions() as session:
            caller = authenticate(session, f"Bearer {made.output.strip().splitlines()[-1]}")
    finally:
        runtime.close()
    assert (caller.role, caller.access.user_id, caller.actor.accessor_type) == (
        "user", "alice", "user")
