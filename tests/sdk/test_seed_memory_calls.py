"""The seed's memory calls, as the seed writes them, against a running server (SQLite and
PostgreSQL): the scope_ref given as ``user_id`` / ``agent_id`` / ``team_id``, and the
pointer answered with the seed's ``MemoryPointer`` fields (tenant, team, user, agent)."""

from __future__ import annotations

import asyncio

import pytest

import memplane
from tests.support.service import Tenant


def test_the_seeds_user_memory_calls_work_as_written(tenant: Tenant) -> None:
    with tenant.client() as client:
        pointer = client.memory.set(scope='user', user_id='user-123', agent_id='agent-456',
                                    key='preferred_language', value='Spanish')
        assert (pointer.scope, pointer.scope_ref, pointer.key) == (
            "user", "user-123", "preferred_language")
        assert (pointer.tenant_id, pointer.team_id, pointer.user_id, pointer.agent_id) == (
            str(tenant.id), None, "user-123", "agent-456")

        memory = client.memory.get(scope='user', user_id='user-123', key='preferred_language')
        assert memory.value == "Spanish"
        assert memory.pointer.model_dump() == pointer.model_dump()

        client.memory.append(scope='user', user_id='user-123', agent_id='agent-456',
                             key='past_issues', value='printer offline')
        appended = client.memory.append(scope='user', user_id='user-123', key='past_issues',
                                        value='VPN drops')
        assert (appended.scope_ref, appended.version, appended.user_id) == (
            "user-123", 2, "user-123")
        assert client.memory.get(scope='user', user_id='user-123',
                                 key='past_issues').value == ["printer offline", "VPN drops"]

        page = client.memory.list_pointers(scope='user', user_id='user-123')
        assert sorted((p.key, p.scope_ref, p.tenant_id) for p in page.items) == [
            ("past_issues", "user-123", str(tenant.id)),
            ("preferred_language", "user-123", str(tenant.id))]
        assert [p.key for p in client.memory.iter_pointers(scope='user', user_id='user-123',
                                                           order='key')] == [
            "past_issues", "preferred_language"]

        client.memory.delete(scope='user', user_id='user-123', key='preferred_language')
        with pytest.raises(memplane.NotFound):
            client.memory.get(scope='user', user_id='user-123', key='preferred_language')
        assert client.memory.clear(scope='user', user_id='user-123') == 1
        assert client.memory.list_pointers(scope='user', user_id='user-123').items == []


def test_team_and_agent_memory_take_their_scope_ref_from_team_id_and_agent_id(
        tenant: Tenant) -> None:
    with tenant.client() as client:
        team = client.memory.set(team_id='team-123', key='status',
                                 value='Email outage in progress')
        assert (team.scope, team.scope_ref, team.team_id, team.tenant_id) == (
            "team", "team-123", "team-123", str(tenant.id))
        assert client.memory.get(team_id='team-123', key='status').value == (
            "Email outage in progress")
        assert client.memory.get(scope='team', team_id='team-123',
                                 key='status').pointer.team_id == "team-123"
        assert [p.team_id for p in client.memory.list_pointers(team_id='team-123').items] == [
            "team-123"]

        agent = client.memory.set(scope='agent', agent_id='agent-456', key='style',
                                  value='bullets')
        assert (agent.scope, agent.scope_ref, agent.agent_id, agent.team_id) == (
            "agent", "agent-456", "agent-456", None)
        assert [p.key for p in client.memory.list_pointers(scope='agent',
                                                           agent_id='agent-456').items] == [
            "style"]
        [batched] = client.memory.set_many([{"scope": "team", "scope_ref": "team-9",
                                             "key": "k", "value": 1}])
        assert batched.pointer is not None
        assert (batched.pointer.team_id, batched.pointer.tenant_id) == ("team-9", str(tenant.id))
        assert client.memory.clear(team_id='team-123') == 1
        client.memory.delete(scope='agent', agent_id='agent-456', key='style')
        assert client.memory.list_pointers(scope='agent', scope_ref='agent-456').items == []


@pytest.mark.parametrize(("call", "message"), [
    (lambda m: m.set(scope='user', scope_ref='user-1', user_id='user-2', key='k', value=1),
     "scope_ref='user-1' contradicts user_id='user-2'"),
    (lambda m: m.get(scope='agent', scope_ref='a-1', agent_id='a-2', key='k'),
     "scope_ref='a-1' contradicts agent_id='a-2'"),
    (lambda m: m.append(scope='team', scope_ref='t-1', team_id='t-2', key='k', value=1),
     "scope_ref='t-1' contradicts team_id='t-2'"),
    (lambda m: m.delete(scope='user', team_id='t-1', key='k'),
     "team_id names a team's memory: give scope='team'"),
    (lambda m: m.clear(user_id='user-1'), "give scope"),
    (lambda m: m.list_pointers(scope='user', agent_id='a-1'),
     "pointers are not filtered by agent_id"),
], ids=["set", "get", "append", "team-id-in-user-scope", "clear-without-scope",
        "list-by-agent-id"])
def test_a_contradicting_scope_ref_is_a_clear_error_and_nothing_is_sent(
        tenant: Tenant, call: object, message: str) -> None:
    with tenant.client() as client:
        with pytest.raises(ValueError, match=message):
            call(client.memory)  # type: ignore[operator]
        assert client.memory.list_pointers().items == []


def test_the_async_client_takes_the_same_spelling(tenant: Tenant) -> None:
    async def run() -> list[object]:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            pointer = await client.memory.set(scope='user', user_id='user-123',
                                              agent_id='agent-456', key='preferred_language',
                                              value='Spanish')
            await client.memory.append(team_id='team-123', key='notes', value='outage')
            value = (await client.memory.get(scope='user', user_id='user-123',
                                             key='preferred_language')).value
            listed = await client.memory.list_pointers(scope='user', user_id='user-123')
            with pytest.raises(ValueError, match="contradicts user_id='user-2'"):
                await client.memory.set(scope='user', scope_ref='user-1', user_id='user-2',
                                        key='k', value=1)
            await client.memory.delete(scope='user', user_id='user-123',
                                       key='preferred_language')
            cleared = await client.memory.clear(scope='team', team_id='team-123')
            return [pointer.scope_ref, pointer.tenant_id, value, [p.key for p in listed.items],
                    cleared]

    assert asyncio.run(run()) == ["user-123", str(tenant.id), "Spanish",
                                  ["preferred_language"], 1]
