"""GET /v1/api-keys: an admin lists the tenant's keys — id, prefix, role, name, scopes, agent,
created and last used — never a secret; revoked keys only when asked; other tenants' keys
never; other roles are refused. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from control_plane.db.models import AccessLog
from tests.support.service import Tenant

FIELDS = ["agent_id", "created_at", "id", "last_used_at", "name", "prefix", "revoked_at", "role",
          "scopes"]


def test_an_admin_lists_the_tenants_keys_without_their_secrets(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    with tenant.client() as admin:
        bot = admin.keys.create(role="agent", name="bot", agent_id="support-bot",
                                scopes=[("team", "T123")])
        officer = admin.keys.create(role="compliance", name="dpo")
    with tenant.stack.http(bot.api_key) as http:  # the bot's first use
        assert http.get("/v1/pointers").status_code == 200
        refused = http.get("/v1/api-keys")
    with tenant.stack.http(tenant.admin_key) as http:
        listed = http.get("/v1/api-keys")
        assert http.delete(f"/v1/api-keys/{officer.id}").status_code == 204
        active = http.get("/v1/api-keys").json()["items"]
        everything = http.get("/v1/api-keys", params={"include_revoked": "true"}).json()["items"]
    assert refused.status_code == 403
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert [(i["role"], i["name"]) for i in items] == [
        ("admin", "initial admin key"), ("agent", "bot"), ("compliance", "dpo")]
    assert all(sorted(item) == FIELDS for item in items)
    text = listed.text
    for secret in (tenant.admin_key, bot.api_key, officer.api_key, other.admin_key):
        assert secret not in text
        assert secret[10:20] not in text  # nothing past the prefix
    by_id = {i["id"]: i for i in items}
    assert by_id[bot.id]["prefix"] == bot.api_key[:10]
    assert by_id[bot.id]["scopes"] == [{"scope": "team", "scope_ref": "T123"}]
    assert by_id[bot.id]["agent_id"] == "support-bot"
    # Used: recorded to the hour. Never used: null.
    assert by_id[bot.id]["last_used_at"] is not None
    assert by_id[bot.id]["last_used_at"][13:19] == ":00:00"
    assert by_id[officer.id]["last_used_at"] is None
    assert [i["id"] for i in active] == [items[0]["id"], bot.id]
    assert [(i["id"], i["revoked_at"] is not None) for i in everything] == [
        (items[0]["id"], False), (bot.id, False), (officer.id, True)]
    with Session(tenant.stack.engine) as session:
        rows = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "key_list")).all()
    assert sorted(rows) == ["2 keys", "3 keys", "3 keys"]


def test_the_sdk_lists_keys_sync_and_async(tenant: Tenant) -> None:
    import asyncio

    import memplane

    with tenant.client() as admin:
        bot = admin.keys.create(role="agent", name="bot", scopes=[("user", "*")])
        admin.keys.delete(bot.id)
        listed = admin.keys.list()
        everything = admin.keys.list(include_revoked=True)

    async def alist() -> list[memplane.ApiKey]:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            return await client.keys.list(include_revoked=True)

    assert [k.name for k in listed] == ["initial admin key"]
    assert [(k.name, k.revoked_at is not None) for k in everything] == [
        ("initial admin key", False), ("bot", True)]
    assert everything[1].scopes == [{"scope": "user", "scope_ref": "*"}]
    assert everything[0].last_used_at is not None
    assert [k.id for k in asyncio.run(alist())] == [k.id for k in everything]
