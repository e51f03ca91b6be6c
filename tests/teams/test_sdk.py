"""The SDK's teams (``client.teams``) and user keys (``client.keys.create(role="user",
user_id=...)``), sync and async, against the live server."""

from __future__ import annotations

import pytest

import memplane
from tests.support.service import Tenant


def test_the_sync_sdk_manages_teams_and_a_member_writes_team_memory(tenant: Tenant) -> None:
    with tenant.client() as admin:
        made = admin.teams.put("support", agents=["triage-bot", "support-bot"],
                               name="Support")
        assert isinstance(made, memplane.Team)
        assert (made.team_id, made.name, made.agents) == ("support", "Support",
                                                          ["support-bot", "triage-bot"])
        admin.teams.update("sales", agents=[])
        assert admin.teams.get("support") == made
        page = admin.teams.list(limit=1)
        assert [t.team_id for t in page.items] == ["sales"]
        assert [t.team_id for t in admin.teams.iter(limit=1)] == ["sales", "support"]
        admin.teams.delete("sales")
        with pytest.raises(memplane.NotFound):
            admin.teams.get("sales")
        with pytest.raises(TypeError):
            admin.teams.put("x", agents="support-bot")
        bot = admin.keys.create(role="agent", name="bot", agent_id="support-bot",
                                scopes=[("agent", "support-bot")])
    with tenant.stack.client(bot.api_key) as agent:
        pointer = agent.memory.set(scope="team", scope_ref="support", key="outage",
                                   value="Email outage in progress")
        assert (pointer.scope, pointer.agent_id) == ("team", "support-bot")
        assert [t.team_id for t in agent.teams.list().items] == ["support"]
        with pytest.raises(memplane.Forbidden):
            agent.teams.delete("support")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_sdk_creates_a_user_key_that_sees_its_subject(tenant: Tenant) -> None:
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as admin:
        await admin.memory.set(scope="user", scope_ref="alice", key="lang", value="Spanish")
        await admin.memory.set(scope="user", scope_ref="bob", key="lang", value="French")
        created = await admin.keys.create(role="user", name="alice", user_id="alice")
        team = await admin.teams.put("support", agents=["support-bot"])
        assert team.agents == ["support-bot"]
        assert [t.team_id async for t in admin.teams.iter()] == ["support"]
    assert (created.role, created.user_id) == ("user", "alice")
    async with memplane.AsyncClient(tenant.stack.base_url, created.api_key) as own:
        assert (await own.memory.get(scope="user", scope_ref="alice", key="lang")).value == (
            "Spanish")
        with pytest.raises(memplane.NotFound):
            await own.memory.get(scope="user", scope_ref="bob", key="lang")
        with pytest.raises(memplane.Forbidden):
            await own.teams.list()
