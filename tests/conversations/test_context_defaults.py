"""Context finds memory unasked, over HTTP on SQLite and PostgreSQL: with ``memory_scopes``
omitted the window searches the conversation's data subject (user scope, and memories about
that user in any scope the key may see), its agent's memories and knowledge — never another
user's or the tenant's — and says where it looked; ``[]`` searches nothing; an explicit list
searches only itself; a scoped key's window holds only what the key may see."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from control_plane.search import indexer
from tests.support.service import Tenant

from .test_messages import _add, _job_done

SYSTEM = "You are a helpful support agent."


def _ids() -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"c-{tag}", f"u-{tag}", f"bot-{tag}"


def _seed(tenant: Tenant, http: httpx.Client, user: str, agent: str) -> dict[str, str]:
    """One memory in each place a window might look; the pointer id of each, by name."""
    ids = {}
    writes = {
        "user": (f"/v1/memories/user/{user}/format", {"value": "Prefers answers in bullet "
                                                               "points."}),
        "agent": (f"/v1/memories/agent/{agent}/policy", {"value": "Escalate refunds over 500 "
                                                                 "euros to a human."}),
        "about": (f"/v1/memories/project/p-{user}/laptop", {
            "value": "The user's laptop is a ThinkPad X1.", "user_id": user}),
        "stranger": (f"/v1/memories/user/{user}-other/format", {
            "value": "Prefers long prose answers."}),
        "tenant": ("/v1/memories/tenant/-/holiday", {"value": "The office closes on "
                                                              "December 24."}),
        "other_agent": (f"/v1/memories/agent/{agent}-other/policy", {
            "value": "Never escalate anything."}),
    }
    for name, (path, body) in writes.items():
        answer = http.put(path, json=body)
        assert answer.status_code in (200, 201), answer.text
        ids[name] = answer.json()["id"]
    knowledge = http.post("/v1/knowledge", json={"agent_id": agent, "documents": [
        {"title": "Printer guide", "content": "Restart the printer before a support call."}]})
    assert knowledge.status_code == 201, knowledge.text
    assert knowledge.json()["documents"][0]["chunk_count"] == 1
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:  # the indexer's round, as its thread runs it
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
    return ids


def _settle_index(tenant: Tenant) -> None:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:  # the indexer's round, as its thread runs it
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)


def _context(http: httpx.Client, conv: str, **body: Any) -> dict[str, Any]:
    answer = http.post(f"/v1/conversations/{conv}/context", json={
        "system_prompt": SYSTEM, "message": "How should you answer me?",
        "token_budget": 4000} | body)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _memory_lines(window: dict[str, Any]) -> set[str]:
    sections = [s for s in window["sections"] if s["kind"] == "memory"]
    if not sections:
        return set()
    (memory,) = sections
    head, *lines = memory["content"].split("\n- ")
    assert head == "Relevant memory:"
    return set(lines)


USER_LINE = "Prefers answers in bullet points."
AGENT_LINE = "Escalate refunds over 500 euros to a human."
ABOUT_LINE = "The user's laptop is a ThinkPad X1."
KNOWLEDGE_LINE = "Printer guide\nRestart the printer before a support call."


def test_omitted_scopes_search_the_subject_the_agent_and_its_knowledge(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "hello", user_id=user, agent_id=agent)
        ids = _seed(tenant, http, user, agent)
        window = _context(http, conv)
    assert _memory_lines(window) == {USER_LINE, AGENT_LINE, ABOUT_LINE, KNOWLEDGE_LINE}
    # The project scope holds a memory about the user: searched for the user's memories only.
    assert window["searched_scopes"] == [
        {"scope": "user", "scope_ref": user, "reason": "data_subject", "user_id": None},
        {"scope": "agent", "scope_ref": agent, "reason": "agent", "user_id": None},
        {"scope": "project", "scope_ref": f"p-{user}", "reason": "data_subject",
         "user_id": user}]
    included = {r["id"] for r in window["report"]
                if r["kind"] == "memory" and r["status"] == "included"}
    assert {ids["user"], ids["agent"], ids["about"]} <= included
    assert not {ids["stranger"], ids["tenant"], ids["other_agent"]} & included
    assert len(included) == 4  # the knowledge chunk is the fourth


def test_an_empty_list_searches_nothing_and_a_named_list_only_itself(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "hello", user_id=user, agent_id=agent)
        _seed(tenant, http, user, agent)
        none = _context(http, conv, memory_scopes=[])
        named = _context(http, conv, memory_scopes=[{"scope": "agent", "scope_ref": agent}])
    assert [s["kind"] for s in none["sections"]] == ["system_prompt", "message",
                                                     "current_message"]
    assert none["searched_scopes"] == []
    assert [r for r in none["report"] if r["kind"] in ("memory", "entry", "event")] == []
    assert _memory_lines(named) == {AGENT_LINE, KNOWLEDGE_LINE}
    assert named["searched_scopes"] == [
        {"scope": "agent", "scope_ref": agent, "reason": "requested", "user_id": None}]


def test_a_conversation_without_user_or_agent_searches_nothing(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "hello")
        _seed(tenant, http, user, agent)
        window = _context(http, conv)
    assert window["searched_scopes"] == []
    assert _memory_lines(window) == set()


def test_a_scoped_key_window_holds_only_what_the_key_may_see(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    with tenant.client() as admin:
        key = admin.keys.create(role="agent", name="narrow bot", agent_id=f"{agent}-narrow",
                                scopes=[{"scope": "conversation", "scope_ref": conv},
                                        {"scope": "user", "scope_ref": user}]).api_key
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "hello", user_id=user, agent_id=agent)
        _seed(tenant, http, user, agent)
    with tenant.stack.http(key) as http:
        window = _context(http, conv)
        refused = http.post(f"/v1/conversations/{conv}/context", json={
            "system_prompt": SYSTEM, "message": "x", "token_budget": 4000,
            "memory_scopes": [{"scope": "agent", "scope_ref": agent}]})
    # The agent's scope and the subject's memory in a project scope are outside its list.
    assert _memory_lines(window) == {USER_LINE}
    assert window["searched_scopes"] == [
        {"scope": "user", "scope_ref": user, "reason": "data_subject", "user_id": None}]
    assert refused.status_code == 404
    assert refused.json() == {"error": "not_found", "detail": f"no memory at agent/{agent}"}


def test_the_sdk_omits_scopes_for_the_default_and_sends_an_empty_list(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    with tenant.client() as client:
        client.conversations.add_message(conv, "user", "hello", user_id=user, agent_id=agent)
        default = client.conversations.context(conv, system_prompt=SYSTEM, message="hi",
                                               token_budget=500)
        empty = client.conversations.context(conv, system_prompt=SYSTEM, message="hi",
                                             token_budget=500, memory_scopes=[])
    assert [(s.scope, s.scope_ref, s.reason) for s in default.searched_scopes] == [
        ("user", user, "data_subject"), ("agent", agent, "agent")]
    assert empty.searched_scopes == []


def test_the_agents_teams_are_searched_and_a_removed_member_loses_them(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    team, other_team = f"team-{conv}", f"team-{conv}-other"
    with tenant.client() as admin:  # the agent's own key: its conversations, nothing else
        key = admin.keys.create(role="agent", name="bot", agent_id=agent,
                                scopes=[{"scope": "conversation", "scope_ref": "*"}]).api_key
    with tenant.stack.http(tenant.admin_key) as http:
        for team_id, agents in ((team, [agent, "someone-else"]), (other_team, ["another"])):
            assert http.put(f"/v1/teams/{team_id}", json={"agents": agents}).status_code == 200
        for team_id, text in ((team, "Note: email outage in progress."),
                              (other_team, "The other team's secret plan.")):
            assert http.put(f"/v1/memories/team/{team_id}/status",
                            json={"value": text}).status_code in (200, 201)
        _add(http, conv, "hello", user_id=user, agent_id=agent)
        _seed(tenant, http, user, agent)
        as_admin = _context(http, conv)
    with tenant.stack.http(key) as http:
        as_member = _context(http, conv)
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put(f"/v1/teams/{team}", json={"agents": ["someone-else"]}).status_code \
            == 200
    with tenant.stack.http(key) as http:
        removed = _context(http, conv)
    team_line = "Note: email outage in progress."
    assert _memory_lines(as_admin) == {USER_LINE, AGENT_LINE, ABOUT_LINE, KNOWLEDGE_LINE,
                                       team_line}
    assert as_admin["searched_scopes"][2:] == [
        {"scope": "team", "scope_ref": team, "reason": "team", "user_id": None},
        {"scope": "project", "scope_ref": f"p-{user}", "reason": "data_subject",
         "user_id": user}]
    # The agent's key sees only its team's memory: no grant on the user or the agent scope.
    assert _memory_lines(as_member) == {team_line}
    assert as_member["searched_scopes"] == [
        {"scope": "team", "scope_ref": team, "reason": "team", "user_id": None}]
    assert (_memory_lines(removed), removed["searched_scopes"]) == (set(), [])


def test_the_seeds_bullet_points_story_as_the_readme_tells_it(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    with tenant.client() as client:
        said = client.memory.remember(
            messages=[{"role": "user", "content": "I prefer responses in bullet points."}],
            user_id=user, agent_id="support-bot")
        with tenant.stack.runtime.sessions() as session:  # "days later": indexed
            runtime = tenant.stack.runtime
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        client.conversations.add_message(f"chat-{user}", "user", "Summarise my open tickets.",
                                         user_id=user, agent_id="support-bot")
        window = client.conversations.context(
            f"chat-{user}", system_prompt="You are a support agent.",
            message="Summarise my open tickets.", token_budget=2000)
    assert [(d.event, d.key, d.value) for d in said.decisions] == [
        ("ADD", "preference.response_format", "bullet points")]
    assert window.sections[1].content == (
        "Relevant memory:\n- Preferred response format: bullet points")
    assert [(s.scope, s.reason) for s in window.searched_scopes] == [
        ("user", "data_subject"), ("agent", "agent")]


def test_a_message_sent_with_remember_reaches_a_later_context(tenant: Tenant) -> None:
    conv, user, agent = _ids()
    with tenant.stack.http(tenant.admin_key) as http:
        added = _add(http, conv, "Hi. I prefer responses in bullet points.", user_id=user,
                     agent_id=agent, remember=True)
        assert added["remember_job_id"] is not None
        assert _job_done(http, added["remember_job_id"])["state"] == "completed"
        _settle_index(tenant)
        _add(http, f"{conv}-later", "hello", user_id=user, agent_id=agent)
        window = _context(http, f"{conv}-later")
    assert _memory_lines(window) == {"Preferred response format: bullet points"}
