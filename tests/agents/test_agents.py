"""Agents as a resource (``/v1/agents``) with the seed's memory settings: an agent's user
memories go to the storage configuration it names, reads find every memory wherever it was
written, and a disabled user memory refuses writes with a sentence."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.db.models import MemoryPointer
from tests.storage_config.helpers import call, create
from tests.support.buckets import S3Bucket
from tests.support.emulators import MotoServer
from tests.support.service import Tenant

BOT = "support-bot"


def _agent_key(tenant: Tenant, agent_id: str) -> str:
    with tenant.client() as admin:
        return admin.keys.create(role="agent", name=agent_id, agent_id=agent_id).api_key


def _config_of(tenant: Tenant, pointer_id: str) -> uuid.UUID | None:
    with Session(tenant.stack.engine) as session:
        return session.scalar(select(MemoryPointer.storage_config_id).where(
            MemoryPointer.id == uuid.UUID(pointer_id)))


def _s3_config(tenant: Tenant, moto_server: MotoServer, name: str) -> tuple[S3Bucket, Any]:
    bucket = S3Bucket(moto_server)
    made = create(tenant, {"name": name, "storage_type": "s3",
                           "connection_config": bucket.connection_config})
    assert made.status_code == 201, made.text
    return bucket, made.json()


def test_the_seeds_agent_settings_are_stored_and_shown(tenant: Tenant,
                                                       moto_server: MotoServer) -> None:
    _, config = _s3_config(tenant, moto_server, "eu-users")
    sc = config["storage_config_id"]
    put = call(tenant, "PUT", f"/v1/agents/{BOT}", json={
        "name": "Support bot",
        "memory": {"userMemory": {"enabled": True, "retention": "90d",
                                  "storageConfigId": sc}}})
    assert put.status_code == 200, put.text
    agent = put.json()
    assert (agent["agent_id"], agent["name"]) == (BOT, "Support bot")
    assert agent["memory"] == {"user_memory": {"enabled": True, "retention": "90d",
                                               "retention_days": 90, "storage_config_id": sc}}
    assert call(tenant, "GET", f"/v1/agents/{BOT}").json() == agent
    other = call(tenant, "PUT", "/v1/agents/sales-bot", json={})
    assert other.json()["memory"]["user_memory"] == {
        "enabled": True, "retention": None, "retention_days": None, "storage_config_id": None}
    page = call(tenant, "GET", "/v1/agents", params={"limit": 1}).json()
    assert [a["agent_id"] for a in page["items"]] == ["sales-bot"]
    rest = call(tenant, "GET", "/v1/agents", params={"cursor": page["next_cursor"]}).json()
    assert ([a["agent_id"] for a in rest["items"]], rest["next_cursor"]) == ([BOT], None)

    # An agent key with an agent id sees only its own agent; other tenants see none.
    bot_key = _agent_key(tenant, BOT)
    assert [a["agent_id"] for a in call(tenant, "GET", "/v1/agents", bot_key).json()["items"]
            ] == [BOT]
    assert call(tenant, "GET", "/v1/agents/sales-bot", bot_key).status_code == 404
    assert call(tenant, "PUT", f"/v1/agents/{BOT}", bot_key, json={}).status_code == 403
    assert call(tenant.stack.new_tenant(), "GET", f"/v1/agents/{BOT}").status_code == 404

    # The configuration an agent routes to cannot be deleted.
    refused = call(tenant, "DELETE", f"/v1/storage/configs/{sc}")
    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        "1 agent(s) send their user memories to this storage configuration (support-bot); "
        "point them elsewhere first (PUT /v1/agents/{agent_id})")
    assert call(tenant, "DELETE", f"/v1/agents/{BOT}").status_code == 204
    assert call(tenant, "GET", f"/v1/agents/{BOT}").status_code == 404
    assert call(tenant, "DELETE", f"/v1/storage/configs/{sc}").status_code == 204
    audit = call(tenant, "GET", "/v1/audit", params={"operation": "agent_update"}).json()
    assert [(r["success"], r["detail"]) for r in audit["items"]] == [
        (True, f"agent {BOT}: user_memory enabled=True retention_days=90 storage_config={sc}"),
        (True, "agent sales-bot: user_memory enabled=True retention_days=None "
               "storage_config=default"),
    ]
    reads = call(tenant, "GET", "/v1/audit", params={"operation": "agent_read"}).json()
    assert [(r["success"], r["detail"]) for r in reads["items"]] == [
        (True, f"agent {BOT}"), (True, "list: 1 agent(s)"), (True, "list: 1 agent(s)"),
        (True, "list: 1 agent(s)"),
        (False, "agent sales-bot not_found: no agent 'sales-bot'; create it with "
                "PUT /v1/agents/{agent_id}"),
        (False, f"agent {BOT} not_found: no agent '{BOT}'; create it with "
                "PUT /v1/agents/{agent_id}")]


def test_bad_settings_are_422_sentences(tenant: Tenant) -> None:
    unknown = f"sc_{uuid.uuid4().hex}"
    cases = [
        ({"memory": {"userMemory": {"storageConfigId": unknown}}},
         f"memory.user_memory.storage_config_id {unknown} is not one of the tenant's storage "
         "configurations (see GET /v1/storage/configs)"),
        ({"memory": {"userMemory": {"storageConfigId": "sc_abc123"}}},
         "'sc_abc123' is not a storage config id: they look like 'sc_' followed by 32 hex "
         "digits (see GET /v1/storage/configs)"),
    ]
    for body, detail in cases:
        answer = call(tenant, "PUT", f"/v1/agents/{BOT}", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"] == detail
    for body in ({"memory": {"userMemory": {"retention": "3 months"}}},
                 {"memory": {"userMemory": {"colour": "red"}}}, {"nam": "x"}):
        answer = call(tenant, "PUT", f"/v1/agents/{BOT}", json=body)
        assert answer.status_code == 422, answer.text
    assert call(tenant, "GET", "/v1/agents").json()["items"] == []


def test_an_agents_user_memories_go_to_its_config_and_are_read_wherever_they_are(
        tenant: Tenant, moto_server: MotoServer) -> None:
    bucket, config = _s3_config(tenant, moto_server, "users")
    default_id = uuid.UUID(call(tenant, "GET", "/v1/storage/config").json()["id"])
    bot = _agent_key(tenant, BOT)
    with tenant.stack.client(bot) as client:  # before the settings: the default
        before = client.memory.set(scope="user", scope_ref="u1", key="early", value="a")
    call(tenant, "PUT", f"/v1/agents/{BOT}", json={
        "memory": {"userMemory": {"enabled": True, "storageConfigId":
                                  config["storage_config_id"]}}})
    with tenant.stack.client(bot) as client:
        user = client.memory.set(scope="user", scope_ref="u1", key="pref", value="b")
        about = client.memory.set(scope="conversation", scope_ref="c1", key="k", value="c",
                                  user_id="u1")
        appended = client.memory.append(scope="user", scope_ref="u1", key="list", value="d")
        team = client.memory.set(scope="team", scope_ref="t1", key="k", value="e")
        moved = client.memory.set(scope="user", scope_ref="u1", key="early", value="a2")
    with tenant.client() as admin:  # no agent: the default
        plain = admin.memory.set(scope="user", scope_ref="u2", key="k", value="f")
    s3_id = uuid.UUID(config["id"])
    assert [_config_of(tenant, p.id) for p in (user, about, appended, moved)] == [s3_id] * 4
    assert [_config_of(tenant, p.id) for p in (team, plain)] == [default_id] * 2
    assert before.id == moved.id
    keys = bucket.keys(config["prefix"] + "/memories/")
    assert len(keys) == 4  # pref, conversation k, list, early (its old version was local)
    with tenant.stack.client(bot) as client:
        assert client.memory.get(scope="user", scope_ref="u1", key="pref").value == "b"
        assert client.memory.get(scope="conversation", scope_ref="c1", key="k").value == "c"
        assert client.memory.get(scope="user", scope_ref="u1", key="list").value == ["d"]
        assert client.memory.get(scope="team", scope_ref="t1", key="k").value == "e"
        assert client.memory.get(scope="user", scope_ref="u1", key="early").value == "a2"


def test_a_disabled_user_memory_refuses_writes_with_a_sentence(tenant: Tenant) -> None:
    put = call(tenant, "PUT", f"/v1/agents/{BOT}",
               json={"memory": {"user_memory": {"enabled": False}}})
    assert put.status_code == 200, put.text
    bot = _agent_key(tenant, BOT)
    with tenant.stack.http(bot) as http:
        refused = http.put("/v1/memories/user/u1/pref", json={"value": "x"})
        about = http.put("/v1/memories/conversation/c1/k", json={"value": "x",
                                                                  "user_id": "u1"})
        appended = http.post("/v1/memories/user/u1/list/append", json={"value": "x"})
        team = http.put("/v1/memories/team/t1/k", json={"value": "x"})
    for answer in (refused, about, appended):
        assert answer.status_code == 409, answer.text
        assert answer.json() == {
            "error": "user_memory_disabled",
            "detail": "user memory is disabled for agent 'support-bot', so it may not write "
                      "user memories; an admin can enable it (PUT /v1/agents/{agent_id} with "
                      "memory.user_memory.enabled = true), or write without a user"}
    assert team.status_code == 200, team.text
    audit = call(tenant, "GET", "/v1/audit", params={"operation": "write"}).json()["items"]
    assert [row["success"] for row in audit] == [False, False, True]
    call(tenant, "PUT", f"/v1/agents/{BOT}", json={"memory": {"userMemory": {"enabled": True}}})
    with tenant.stack.http(bot) as http:  # seen at once through this process
        assert http.put("/v1/memories/user/u1/pref", json={"value": "x"}).status_code == 200


def test_search_vectors_stay_in_the_bucket_of_the_memories_they_come_from(
        tenant: Tenant, moto_server: MotoServer) -> None:
    """A scope whose memories sit in two buckets (written before and after its agent was
    routed elsewhere) keeps a search segment per bucket: the texts and vectors of the routed
    memories never land in the default bucket, nor the others' in the agent's."""
    from control_plane.db.models import SearchSegment
    from control_plane.search import indexer, segment_writing, store

    bucket, config = _s3_config(tenant, moto_server, "eu-users")
    s3_id = uuid.UUID(config["id"])
    bot = _agent_key(tenant, BOT)
    with tenant.stack.client(bot) as client:
        early = client.memory.set(scope="user", scope_ref="u1", key="early", value="in the default")
    call(tenant, "PUT", f"/v1/agents/{BOT}", json={
        "memory": {"userMemory": {"enabled": True, "storageConfigId":
                                  config["storage_config_id"]}}})
    with tenant.stack.client(bot) as client:
        pref = client.memory.set(scope="user", scope_ref="u1", key="pref", value="in the EU")
    runtime = tenant.stack.runtime
    by_config: dict[uuid.UUID, set[uuid.UUID]] = {}

    def segments() -> dict[uuid.UUID, set[uuid.UUID]]:
        with runtime.sessions() as session:
            rows = list(session.scalars(select(SearchSegment).where(
                SearchSegment.tenant_id == tenant.id, SearchSegment.scope_ref == "u1")))
            found: dict[uuid.UUID, set[uuid.UUID]] = {}
            for row in rows:
                loaded = store.load_segment(session, runtime.plane, runtime.search_cache, row)
                found.setdefault(row.storage_config_id, set()).update(loaded.ids)
            return found

    with runtime.sessions() as session:
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
    default_id = _config_of(tenant, early.id)
    assert default_id is not None and default_id != s3_id
    by_config = segments()
    assert by_config == {default_id: {uuid.UUID(early.id)}, s3_id: {uuid.UUID(pref.id)}}
    with runtime.sessions() as session:  # a compaction keeps them apart too
        assert segment_writing.compact_scope(session, runtime.plane, runtime.search_cache,
                                             tenant.id, "user", "u1", "memplane-hash-v2")
    assert segments() == by_config
    with runtime.sessions() as session:
        s3_paths = {row.storage_path for row in session.scalars(select(SearchSegment).where(
            SearchSegment.tenant_id == tenant.id, SearchSegment.storage_config_id == s3_id))}
    assert len(s3_paths) == 1
    assert {f"{config['prefix']}/{p}" for p in s3_paths} <= set(bucket.keys(config["prefix"]))
