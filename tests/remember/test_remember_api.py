"""POST /v1/remember with the built-in extractor, on SQLite and PostgreSQL: the seed's
bullet-points story (ADD, UPDATE with the previous value kept, DELETE of a retracted system,
NONE for a repeat), dry runs, provenance, the value only in the bucket, export and erasure
of the subject, sensitive statements never stored, roles and scoped keys, bad input."""

from __future__ import annotations

import json
import logging
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from control_plane.db.models import AccessLog, MemoryPointer
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support.service import Tenant

CARD = "4111 1111 1111 1111"


def said(http: httpx.Client, user: str, *lines: str, **fields: Any) -> dict[str, Any]:
    answer = http.post("/v1/remember", json={
        "messages": [{"role": "user", "content": line} for line in lines], "user_id": user,
        **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def events(answer: dict[str, Any]) -> list[tuple[str, str, str | None, str | None, str]]:
    return [(d["event"], d["key"], d["value"], d["previous"], d["reason"])
            for d in answer["decisions"]]


def pointers(tenant: Tenant, user: str) -> dict[str, MemoryPointer]:
    with tenant.stack.runtime.sessions() as session:
        return {p.key: p for p in session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == tenant.id, MemoryPointer.scope_type == "user",
            MemoryPointer.scope_ref == user))}


def test_the_seeds_story_add_update_delete_none(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        first = said(http, user, "I prefer responses in bullet points.",
                     "I use Slack for team chat.", conversation_id="c-1",
                     agent_id="support-bot")
        stored = http.get(f"/v1/memories/user/{user}/preference.response_format").json()
        second = said(http, user, "Actually, I prefer numbered lists.", conversation_id="c-2",
                      agent_id="support-bot")
        third = said(http, user, "Hello!", "I don't use Slack anymore.",
                     "I prefer numbered lists.")
        fourth = said(http, user, "I don't use Slack anymore.")
        now = http.get(f"/v1/memories/user/{user}/preference.response_format").json()
        slack = http.get(f"/v1/memories/user/{user}/uses.slack")
    assert events(first) == [
        ("ADD", "preference.response_format", "bullet points", None, "new fact"),
        ("ADD", "uses.slack", "Slack for team chat", None, "new fact")]
    assert (first["extractor"], first["model"], first["dry_run"]) == ("builtin-v1", None, False)
    assert stored["value"] == {
        "content": "Preferred response format: bullet points", "value": "bullet points",
        "previous": [], "provenance": {"conversation_id": "c-1", "message_seqs": [1],
                                       "extractor": "builtin-v1", "model": None}}
    pointer = stored["pointer"]
    assert (pointer["source"], pointer["user_id"], pointer["agent_id"], pointer["tags"],
            pointer["memory_type"], pointer["version"]) == (
        "remember", user, "support-bot",
        ["remember", "extractor:builtin-v1", "seqs:1", "conversation:c-1"], "preference", 1)
    assert events(second) == [("UPDATE", "preference.response_format", "numbered lists",
                               "bullet points", "changed")]
    assert events(third) == [
        ("DELETE", "uses.slack", None, "Slack for team chat", "retracted"),
        ("NONE", "preference.response_format", "numbered lists", None, "already known")]
    assert events(fourth) == [("NONE", "uses.slack", None, None, "nothing stored to retract")]
    value = now["value"]
    assert (value["value"], value["content"], now["pointer"]["version"]) == (
        "numbered lists", "Preferred response format: numbered lists", 2)
    assert [p["value"] for p in value["previous"]] == ["bullet points"]
    assert value["provenance"]["conversation_id"] == "c-2"
    assert slack.status_code == 404
    assert sorted(pointers(tenant, user)) == ["preference.response_format"]
    with tenant.stack.runtime.sessions() as session:
        rows = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "remember",
            AccessLog.success.is_(True))).all()
    assert sorted(rows) == sorted(["user: builtin-v1 add=2 update=0 delete=0 none=0",
                    "user: builtin-v1 add=0 update=1 delete=0 none=0",
                    "user: builtin-v1 add=0 update=0 delete=1 none=1",
                    "user: builtin-v1 add=0 update=0 delete=0 none=1"])


def test_the_rule_table(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        answer = said(http, user, "Hi, my name is Ana Lopez. I work in the finance team.",
                      "I'm a product manager. I'm a bit tired.", "Call me Ana, please.",
                      "I'm working on the Apollo migration.", "I love jazz!",
                      "I had a problem with my VPN. The VPN was fixed by reinstalling it.",
                      "I prefer to be contacted by email. I work at Acme Corp.",
                      "Can you book me a table for two?")
        stored = http.get(f"/v1/memories/user/{user}/name").json()["value"]
    assert [(e, k, v) for e, k, v, _, _ in events(answer)] == [
        ("ADD", "team", "finance"),
        ("ADD", "role", "product manager"),
        ("ADD", "name", "Ana"),
        ("ADD", "project.apollo-migration", "Apollo migration"),
        ("ADD", "likes.jazz", "loves jazz"),
        ("ADD", "issue.vpn", "VPN"),
        ("ADD", "resolution.vpn", "reinstalling it"),
        ("ADD", "preference.contact_channel", "email"),
        ("ADD", "employer", "Acme Corp")]
    # "my name is Ana Lopez" then "call me Ana": one fact, the last statement, both seqs.
    assert stored["provenance"]["message_seqs"] == [1, 3]
    assert stored["value"] == "Ana"


def test_dry_run_writes_nothing(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        said(http, user, "I use Jira.")
        objects = tenant.objects()
        answer = said(http, user, "I prefer short answers.", "I no longer use Jira.",
                      "I use Linear.", dry_run=True)
        jira = http.get(f"/v1/memories/user/{user}/uses.jira")
    assert events(answer) == [
        ("ADD", "preference.response_format", "short answers", None, "new fact"),
        ("DELETE", "uses.jira", None, "Jira", "retracted"),
        ("ADD", "uses.linear", "Linear", None, "new fact")]
    assert answer["dry_run"] is True
    assert tenant.objects() == objects
    assert sorted(pointers(tenant, user)) == ["uses.jira"]
    assert jira.json()["value"]["value"] == "Jira"


def test_values_only_in_the_bucket_export_and_erasure(tenant: Tenant, tmp_path: Path) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    marker = f"Marker{uuid.uuid4().hex[:10]}"
    with tenant.stack.http(tenant.admin_key) as http:
        said(http, user, f"My favourite colour is {marker}.", "I use Notion.")
        said(http, user, f"My favourite colour is {marker}blue.")
    assert sorted(pointers(tenant, user)) == ["about.favourite-colour", "uses.notion"]
    assert marker not in _database_text(tenant)
    assert all(marker.encode() not in p.read_bytes() for p in tenant.objects())
    with tenant.client() as officer:
        job = officer.memory.export(user_id=user)
        assert officer.jobs.wait(job.id).state == "completed"
        officer.exports.download(job.id, tmp_path / "export.zip")
        with zipfile.ZipFile(tmp_path / "export.zip") as archive:
            manifest = json.loads(archive.read("manifest.json"))
            items = {i["key"]: json.loads(archive.read(i["file"]))
                     for i in manifest["items"] if i.get("key")}
        assert sorted(items) == ["about.favourite-colour", "uses.notion"]
        colour = items["about.favourite-colour"]
        assert (colour["value"], colour["previous"][0]["value"]) == (f"{marker}blue", marker)
        assert colour["provenance"] == {"conversation_id": None, "message_seqs": [1],
                                        "extractor": "builtin-v1", "model": None}
        paths = [p.storage_path for p in pointers(tenant, user).values()]
        assert officer.jobs.wait(officer.memory.erase_user(user).id).state == "completed"
    assert pointers(tenant, user) == {}
    assert [p for p in tenant.objects() if any(str(p).endswith(s) for s in paths)] == []


def test_a_sensitive_statement_is_never_stored(tenant: Tenant,
                                               caplog: pytest.LogCaptureFixture) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    caplog.set_level(logging.DEBUG)
    with tenant.stack.http(tenant.admin_key) as http:
        answer = said(http, user, f"my card is {CARD}", "My password is hunter2-Zebra",
                      "I use Zoom.")
        card = http.get(f"/v1/memories/user/{user}/about.card")
        audit = http.get("/v1/audit", params={"limit": 1000}).text
    assert events(answer) == [
        ("NONE", "about.card", None, None, "sensitive:card"),
        ("NONE", "about.password", None, None, "sensitive:password"),
        ("ADD", "uses.zoom", "Zoom", None, "new fact")]
    assert card.status_code == 404
    assert sorted(pointers(tenant, user)) == ["uses.zoom"]
    for text in (_database_text(tenant), audit, caplog.text, json.dumps(answer)):
        assert CARD not in text and CARD.replace(" ", "") not in text
        assert "hunter2-Zebra" not in text


def test_roles_scoped_keys_and_bad_input(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    body = {"messages": [{"role": "user", "content": "I use Figma."}], "user_id": user}
    with tenant.client() as admin:
        compliance = admin.keys.create(role="compliance", name="c").api_key
        agent = admin.keys.create(role="agent", name="a", agent_id="helper").api_key
        scoped = admin.keys.create(role="agent", name="s", scopes=[
            {"scope": "user", "scope_ref": "someone-else"}]).api_key
    with tenant.stack.http(compliance) as http:
        refused = http.post("/v1/remember", json=body)
    with tenant.stack.http(scoped) as http:
        outside = http.post("/v1/remember", json=body)
    with tenant.stack.http(agent) as http:
        by_agent = http.post("/v1/remember", json=body)
        wrong_agent = http.post("/v1/remember", json=body | {"agent_id": "other",
                                                             "messages": [{
                                                                 "role": "user",
                                                                 "content": "I use Miro."}]})
        empty = http.post("/v1/remember", json=body | {"messages": []})
        extra = http.post("/v1/remember", json=body | {"mood": "happy"})
        no_ref = http.post("/v1/remember", json=body | {"scope": "team"})
        assistant = http.post("/v1/remember", json=body | {"messages": [
            {"role": "assistant", "content": "I use Figma too."}]})
    assert refused.status_code == 403
    assert (outside.status_code, outside.json()["detail"]) == (404, f"no memory at user/{user}")
    assert by_agent.status_code == 200, by_agent.text
    assert pointers(tenant, user)["uses.figma"].agent_id == "helper"
    assert wrong_agent.status_code == 403
    assert "writes as agent 'helper'" in wrong_agent.json()["detail"]
    assert (empty.status_code, extra.status_code) == (422, 422)
    assert (no_ref.status_code, no_ref.json()["detail"]) == (
        422, "scope 'team' needs scope_ref")
    assert assistant.json()["decisions"] == []
    assert sorted(pointers(tenant, user)) == ["uses.figma"]
