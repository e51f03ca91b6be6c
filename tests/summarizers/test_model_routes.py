"""Model routing: PUT/GET /v1/model-routes, on SQLite and PostgreSQL, against a small real
chat server (tests/support/fake_llm.py). Every rule's endpoint is probed before anything is
saved; keys are sealed and never shown, logged or audited; the compactor calls the rule of
each bucket's scope, else the purpose's rule, else the tenant's summariser config; and
``route_for`` (the public entry point of extraction) answers the same way."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from control_plane.summarizers.routing import route_for
from tests.api.test_no_content_in_control_plane import _database_text
from tests.compactor.test_api_run import _run
from tests.compactor.test_llm_run import _events
from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

KEYS = {name: f"sk-{name}-" + "r0ute" * 8 for name in ("general", "entity", "talk", "fallback")}


def rule(server: FakeLLM, purpose: str, model: str, key: str | None, **more: Any
         ) -> dict[str, Any]:
    return {"purpose": purpose, "base_url": server.base_url, "model": model,
            **({"api_key": KEYS[key]} if key else {}), "timeout_seconds": 5,
            "max_retries": 0, **more}


def rules(server: FakeLLM) -> list[dict[str, Any]]:
    return [rule(server, "compaction", "general-model", "general",
                 token_budget_per_run=50_000),
            rule(server, "compaction", "entity-model", "entity", scope="entity"),
            rule(server, "conversation_summary", "talk-model", "talk"),
            rule(server, "extraction", "extract-model", None, token_budget_per_run=1000)]


def _audit(tenant: Tenant, operation: str) -> list[Any]:
    with tenant.client() as client:
        return list(client.audit.list(operation=operation).items)


def test_rules_are_probed_saved_and_shown_without_keys(
        tenant: Tenant, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with tenant.stack.http(tenant.admin_key) as http:
        empty = http.get("/v1/model-routes").json()
        assert (empty["rules"], empty["fallback"]["provider"]) == ([], "extractive")
        saved = http.put("/v1/model-routes", json={"rules": rules(fake_llm)})
        assert saved.status_code == 200, saved.text
        assert [(p.json["model"], p.json["max_tokens"], p.headers.get("Authorization"))
                for p in fake_llm.seen] == [
            ("general-model", 1, f"Bearer {KEYS['general']}"),
            ("entity-model", 1, f"Bearer {KEYS['entity']}"),
            ("talk-model", 1, f"Bearer {KEYS['talk']}"),
            ("extract-model", 1, None)]
        shown = http.get("/v1/model-routes")
        assert shown.json() == saved.json()
        assert shown.json()["rules"] == [
            {"purpose": "compaction", "scope": None, "base_url": fake_llm.base_url,
             "model": "general-model", "has_api_key": True, "timeout_seconds": 5.0,
             "max_retries": 0, "token_budget_per_run": 50_000},
            {"purpose": "compaction", "scope": "entity", "base_url": fake_llm.base_url,
             "model": "entity-model", "has_api_key": True, "timeout_seconds": 5.0,
             "max_retries": 0, "token_budget_per_run": None},
            {"purpose": "conversation_summary", "scope": None, "base_url": fake_llm.base_url,
             "model": "talk-model", "has_api_key": True, "timeout_seconds": 5.0,
             "max_retries": 0, "token_budget_per_run": None},
            {"purpose": "extraction", "scope": None, "base_url": fake_llm.base_url,
             "model": "extract-model", "has_api_key": False, "timeout_seconds": 5.0,
             "max_retries": 0, "token_budget_per_run": 1000}]
    [write] = _audit(tenant, "model_routes_write")
    assert write.detail == (
        "4 rules; compaction/* host=127.0.0.1 model=general-model has_api_key=True "
        "token_budget_per_run=50000; compaction/entity host=127.0.0.1 model=entity-model "
        "has_api_key=True token_budget_per_run=None; conversation_summary/* host=127.0.0.1 "
        "model=talk-model has_api_key=True token_budget_per_run=None; extraction/* "
        "host=127.0.0.1 model=extract-model has_api_key=False token_budget_per_run=1000")
    assert [r.detail for r in _audit(tenant, "model_routes_read")] == ["0 rules", "4 rules"]
    database = _database_text(tenant)
    for key in KEYS.values():
        assert key not in shown.text and key not in caplog.text and key not in database


def test_a_rule_that_fails_its_probe_saves_nothing(tenant: Tenant, fake_llm: FakeLLM) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/model-routes", json={"rules": rules(fake_llm)[:1]}
                        ).status_code == 200
        fake_llm.answer(llm.ok(), llm.error(401))
        refused = http.put("/v1/model-routes", json={"rules": rules(fake_llm)[1:3]})
        assert refused.status_code == 422
        assert refused.json()["detail"].startswith(
            "rule 1 (conversation_summary/*): the summariser endpoint rejected the API key "
            "(auth_failed); nothing was saved")
        assert [r["model"] for r in http.get("/v1/model-routes").json()["rules"]] == [
            "general-model"]
        assert http.put("/v1/model-routes", json={"rules": []}).json()["rules"] == []


@pytest.mark.parametrize(("bad", "words"), [
    ({"rules": [{"purpose": "embedding"}]}, "rule 0: the 'embedding' purpose is not routed"),
    ({"rules": [{"purpose": "compaction"}] * 2}, "rule 1: a second rule for purpose "
                                                 "'compaction' and scope 'any'"),
    ({"rules": [{"purpose": "summaries"}]}, "purpose"),
    ({"rules": [{"purpose": "compaction", "base_url": "ftp://x"}]}, "base_url must be"),
    ({"rules": [{"purpose": "compaction", "token_budget_per_run": 5}]},
     "token_budget_per_run"),
])
def test_bad_rules_are_refused_with_a_sentence(tenant: Tenant, fake_llm: FakeLLM,
                                               bad: dict[str, Any], words: str) -> None:
    for item in bad["rules"]:
        item.setdefault("base_url", fake_llm.base_url)
        item.setdefault("model", "m")
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.put("/v1/model-routes", json=bad)
        assert answer.status_code == 422, answer.text
        assert words in answer.json()["detail"]
    assert fake_llm.seen == []


def test_only_admins_change_the_rules(tenant: Tenant, fake_llm: FakeLLM) -> None:
    for role, put, get in (("agent", 403, 403), ("compliance", 403, 200)):
        with tenant.stack.http(tenant.key(role)) as http:
            assert http.put("/v1/model-routes", json={"rules": []}).status_code == put
            assert http.get("/v1/model-routes").status_code == get


def test_the_compactor_calls_the_rule_of_each_buckets_scope_else_the_fallback(
        tenant: Tenant, fake_llm: FakeLLM) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/summarizer/config", json={
            "base_url": fake_llm.base_url, "model": "fallback-model",
            "api_key": KEYS["fallback"], "max_retries": 0}).status_code == 200
        entity_rule = rule(fake_llm, "compaction", "entity-model", "entity", scope="entity")
        assert http.put("/v1/model-routes", json={"rules": [entity_rule]}).status_code == 200
        _events(http, "entity", "ent_acme", 3)
        _events(http, "project", "p1", 3)
        fake_llm.seen.clear()
        assert _run(http)["result"]["entries_written"] == 2
        assert sorted((s.json["model"], s.headers["Authorization"]) for s in fake_llm.seen
                      ) == [("entity-model", f"Bearer {KEYS['entity']}"),
                            ("fallback-model", f"Bearer {KEYS['fallback']}")]
        for scope, ref, model in (("entity", "ent_acme", "entity-model"),
                                  ("project", "p1", "fallback-model")):
            [entry] = http.get("/v1/entries", params={"scope": scope,
                                                      "scope_ref": ref}).json()["items"]
            trace = http.get(f"/v1/compactor/provenance/{entry['id']}").json()
            assert (trace["provider"], trace["model"]) == ("openai_compatible", model)

        # A rule for every scope takes the project bucket from the fallback.
        general = rule(fake_llm, "compaction", "general-model", "general")
        assert http.put("/v1/model-routes", json={"rules": [entity_rule, general]}
                        ).status_code == 200
        _events(http, "project", "p2", 3)
        fake_llm.seen.clear()
        _run(http)
        assert [s.json["model"] for s in fake_llm.seen] == ["general-model"]


def test_route_for_picks_the_most_specific_rule_then_the_fallback(
        tenant: Tenant, fake_llm: FakeLLM) -> None:
    runtime = tenant.stack.runtime

    def route(purpose: str, scope: str | None = None) -> Any:
        with runtime.sessions() as session:
            return route_for(session, runtime, tenant.id, purpose, scope)

    assert route("extraction") is None  # nothing configured: offline
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/summarizer/config", json={
            "base_url": fake_llm.base_url, "model": "fallback-model",
            "api_key": KEYS["fallback"], "token_budget_per_run": 7000}).status_code == 200
        fallback = route("extraction", "user")
        assert (fallback.source, fallback.model, fallback.api_key, fallback.token_budget) == (
            "summarizer_config", "fallback-model", KEYS["fallback"], 7000)
        assert http.put("/v1/model-routes", json={"rules": [
            rule(fake_llm, "extraction", "extract-model", "general",
                 token_budget_per_run=1000),
            rule(fake_llm, "extraction", "user-model", "entity", scope="user")]}
                        ).status_code == 200
    general, user = route("extraction", "agent"), route("extraction", "user")
    assert (general.source, general.model, general.api_key, general.token_budget,
            general.scope) == ("rule", "extract-model", KEYS["general"], 1000, None)
    assert (user.model, user.api_key, user.scope, user.base_url) == (
        "user-model", KEYS["entity"], "user", fake_llm.base_url)
    assert KEYS["entity"] not in repr(user)
    assert route("compaction").source == "summarizer_config"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/model-routes", json={"rules": [
            rule(fake_llm, "extraction", "tenant-model", None, scope="institutional")]}
                        ).json()["rules"][0]["scope"] == "tenant"
    assert route("extraction", "institutional").model == "tenant-model"
    assert route("extraction", "tenant").model == "tenant-model"
    assert route("extraction", "user").model == "fallback-model"


def test_conversation_summaries_call_their_rule_and_compaction_keeps_its_own(
        tenant: Tenant, fake_llm: FakeLLM) -> None:
    from tests.conversations.test_messages import _add, _job_done

    conv = "c-routed"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/summarizer/config", json={
            "base_url": fake_llm.base_url, "model": "fallback-model",
            "api_key": KEYS["fallback"], "max_retries": 0}).status_code == 200
        for _ in range(10):
            _add(http, conv, "We agreed to move 20% of the budget to Meta on Friday.",
                 context_window_limit=256)
        fake_llm.seen.clear()
        first = _job_done(http, http.post(f"/v1/conversations/{conv}/summarize").json()["id"])
        assert first["result"]["provider"] == "openai_compatible"
        assert [s.json["model"] for s in fake_llm.seen] == ["fallback-model"]

        assert http.put("/v1/model-routes", json={"rules": rules(fake_llm)}).status_code == 200
        for _ in range(4):
            _add(http, conv, "We agreed to move 20% of the budget to Meta on Friday.")
        fake_llm.seen.clear()
        _job_done(http, http.post(f"/v1/conversations/{conv}/summarize").json()["id"])
        assert [(s.json["model"], s.headers["Authorization"]) for s in fake_llm.seen] == [
            ("talk-model", f"Bearer {KEYS['talk']}")]
        summary = http.get(f"/v1/memories/conversation/{conv}/summary").json()["value"]
        assert summary["model"] == "talk-model"
