"""Per-tenant summariser routing: PUT/GET/DELETE /v1/summarizer/config (issue 11, point 5).

The endpoint is probed before anything is saved (generic problem codes, never the remote's
answer), the same SSRF guard as storage endpoints applies, the API key is sealed at rest and
never shown, logged or audited, and only admins may change it. Runs on SQLite and PostgreSQL
against a small real chat server (tests/support/fake_llm.py).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import select, update

from control_plane.db.engine import begin_write
from control_plane.db.models import SummarizerConfig
from control_plane.summarizers import SummarizerFailed, TokenBudget
from control_plane.summarizers.extractive import ExtractiveSummarizer
from control_plane.summarizers.openai_compat import OpenAICompatibleSummarizer
from control_plane.summarizers.service import summarizer_for
from tests.api.test_no_content_in_control_plane import _database_text
from tests.summarizers.test_openai_compat import EVENTS
from tests.support import fake_llm as llm
from tests.support.emulators import closed_port
from tests.support.fake_llm import REMOTE_SECRET, FakeLLM
from tests.support.service import Tenant

KEY = "sk-tenant-" + "s3cr3t" * 8
DEFAULT = {"provider": "extractive", "base_url": None, "model": "extractive-v1",
           "has_api_key": False, "timeout_seconds": None, "max_retries": None,
           "token_budget_per_run": None, "prompt_version": "extract-v1",
           "configured_at": None}


def body(server: FakeLLM, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"base_url": server.base_url, "model": "fake-model",
                              "api_key": KEY, "timeout_seconds": 5, "max_retries": 1,
                              "token_budget_per_run": 5000}
    values.update(changes)
    return values


def call(tenant: Tenant, method: str, json: Any = None, key: str | None = None) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.request(method, "/v1/summarizer/config", json=json)


def audit_rows(tenant: Tenant, operation: str) -> list[Any]:
    with tenant.client() as client:
        return list(client.audit.list(operation=operation).items)


def test_configure_show_and_remove(tenant: Tenant, fake_llm: FakeLLM) -> None:
    assert call(tenant, "GET").json() == DEFAULT
    answer = call(tenant, "PUT", body(fake_llm))
    assert answer.status_code == 200
    shown = answer.json()
    assert shown.pop("configured_at") is not None
    assert shown == {"provider": "openai_compatible", "base_url": fake_llm.base_url,
                     "model": "fake-model", "has_api_key": True, "timeout_seconds": 5.0,
                     "max_retries": 1, "token_budget_per_run": 5000,
                     "prompt_version": "compress-v1"}
    assert KEY not in answer.text
    [probe] = fake_llm.seen
    assert probe.headers["Authorization"] == f"Bearer {KEY}"
    assert (probe.json["model"], probe.json["max_tokens"]) == ("fake-model", 1)

    again = call(tenant, "GET").json()
    assert again == answer.json()
    [write] = audit_rows(tenant, "summarizer_config_write")
    config_id = _config_id(tenant)
    assert write.success is True
    assert write.detail == (f"config {config_id}: provider=openai_compatible host=127.0.0.1 "
                            f"model=fake-model has_api_key=True timeout_seconds=5 "
                            f"max_retries=1 token_budget_per_run=5000")
    # in chain order: the first GET saw the default
    assert [r.detail for r in audit_rows(tenant, "summarizer_config_read")] == [
        "default", f"config {config_id}"]

    removed = call(tenant, "DELETE")
    assert (removed.status_code, removed.json()) == (200, DEFAULT)
    assert call(tenant, "GET").json() == DEFAULT
    assert [r.detail for r in audit_rows(tenant, "summarizer_config_delete")] == [
        f"config {config_id} removed"]
    assert _config_id(tenant) is None
    # deleting again is harmless
    assert call(tenant, "DELETE").json() == DEFAULT


def _config_id(tenant: Tenant) -> Any:
    with tenant.stack.runtime.sessions() as session:
        return session.scalar(select(SummarizerConfig.id)
                              .where(SummarizerConfig.tenant_id == tenant.id))


def test_the_compactor_gets_the_configured_endpoint_with_the_sealed_key(
        tenant: Tenant, fake_llm: FakeLLM) -> None:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        assert isinstance(summarizer_for(session, runtime, tenant.id, TokenBudget()),
                          ExtractiveSummarizer)
    assert call(tenant, "PUT", body(fake_llm)).status_code == 200
    budget = TokenBudget()
    with runtime.sessions() as session:
        summarizer = summarizer_for(session, runtime, tenant.id, budget)
    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert (summarizer.model, summarizer.timeout_seconds, summarizer.max_retries) == (
        "fake-model", 5.0, 1)
    assert budget.limit == 5000  # the tenant's token_budget_per_run
    fake_llm.answer(llm.ok("- Spend moves to Meta.", total_tokens=900))
    summary = summarizer.summarize("entity", "ent_acme", EVENTS)
    assert (summary.text, summary.provider, summary.model, summary.tokens_used) == (
        "- Spend moves to Meta.", "openai_compatible", "fake-model", 900)
    assert fake_llm.seen[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert budget.spent == 900

    # without a budget of its own, the server's default applies (from Settings too)
    assert call(tenant, "PUT", body(fake_llm, token_budget_per_run=None,
                                    api_key=None)).json()["token_budget_per_run"] == 200_000
    budget = TokenBudget()
    with runtime.sessions() as session:
        summarizer = summarizer_for(session, runtime.settings, tenant.id, budget)
    assert budget.limit == 200_000
    summarizer.summarize("entity", "ent_acme", EVENTS)
    assert "Authorization" not in fake_llm.seen[-1].headers


def test_a_key_moved_to_another_row_does_not_open(tenant: Tenant, stack: Any,
                                                  fake_llm: FakeLLM) -> None:
    other = stack.new_tenant()
    assert call(tenant, "PUT", body(fake_llm)).status_code == 200
    assert call(other, "PUT", body(fake_llm, api_key="sk-other-key-1234")).status_code == 200
    runtime = stack.runtime
    with runtime.sessions() as session:
        blob = session.scalar(select(SummarizerConfig.api_key_encrypted)
                              .where(SummarizerConfig.tenant_id == tenant.id))
        begin_write(session)  # SQLite: take the write lock before writing
        session.execute(update(SummarizerConfig).where(SummarizerConfig.tenant_id == other.id)
                        .values(api_key_encrypted=blob))
        session.commit()
        summarizer = summarizer_for(session, runtime, other.id, TokenBudget())
    seen = len(fake_llm.seen)
    with pytest.raises(SummarizerFailed) as failed:
        summarizer.summarize("entity", "e", EVENTS)
    assert failed.value.code == "credentials_unreadable"
    assert len(fake_llm.seen) == seen  # nothing sent


@pytest.mark.parametrize(("answer", "code", "sentence"), [
    (llm.error(401), "auth_failed", "the summariser endpoint rejected the API key"),
    (llm.error(404), "endpoint_refused", "the summariser endpoint refused the request (check "
                                         "the base URL and the model name)"),
    (llm.server_error(), "server_error",
     "the summariser endpoint kept failing with a server error"),
    (llm.not_json(), "malformed_answer", "the summariser endpoint did not answer as an "
                                         "OpenAI-compatible chat completion"),
    (llm.no_choices(), "malformed_answer", "the summariser endpoint did not answer as an "
                                           "OpenAI-compatible chat completion"),
], ids=["401", "404", "500", "not-json", "no-choices"])
def test_a_failed_probe_saves_nothing(tenant: Tenant, fake_llm: FakeLLM, answer: llm.Answer,
                                      code: str, sentence: str,
                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert call(tenant, "PUT", body(fake_llm, model="first-model")).status_code == 200
    fake_llm.answer(answer)
    refused = call(tenant, "PUT", body(fake_llm, model="second-model",
                                       api_key="sk-second-" + "x" * 30))
    assert refused.status_code == 422
    assert refused.json() == {
        "error": "validation_error", "problem": code,
        "detail": f"{sentence} ({code}); nothing was saved — fix the base_url, model or "
                  f"api_key and retry"}
    assert len(fake_llm.seen) == 2  # one probe each, no retry
    assert call(tenant, "GET").json()["model"] == "first-model"
    failure = [r for r in audit_rows(tenant, "summarizer_config_write") if not r.success]
    assert [r.detail for r in failure] == [
        f"provider=openai_compatible host=127.0.0.1 model=second-model validation_error: "
        f"{sentence} ({code}); nothing was saved — fix the base_url, model or api_key and "
        f"retry"]
    assert REMOTE_SECRET not in refused.text and REMOTE_SECRET not in caplog.text
    assert "sk-second-" not in caplog.text and KEY not in caplog.text


def test_a_stalled_probe_times_out(tenant: Tenant, fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.stall())
    refused = call(tenant, "PUT", body(fake_llm, timeout_seconds=0.2))
    assert (refused.status_code, refused.json()["problem"]) == (422, "timeout")
    assert call(tenant, "GET").json() == DEFAULT


@pytest.mark.parametrize("base_url", [
    "http://169.254.169.254/v1", "http://10.0.0.5:8080/v1", "http://[::1]:8080/v1",
    "http://llm.evil.example/v1", "http://metadata.google.internal/computeMetadata/v1"])
def test_endpoints_outside_the_guard_are_refused(tenant: Tenant, base_url: str) -> None:
    refused = call(tenant, "PUT", {"base_url": base_url, "model": "m", "api_key": KEY})
    assert refused.status_code == 422
    assert refused.json()["problem"] == "endpoint_not_allowed"
    assert refused.json()["detail"] == (
        "the summariser endpoint is not allowed on this server: use a public endpoint, or one "
        "the operator lists in MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, link-local and "
        "metadata addresses are refused) (endpoint_not_allowed); nothing was saved — fix the "
        "base_url, model or api_key and retry")
    assert call(tenant, "GET").json() == DEFAULT


def test_a_name_resolving_to_loopback_is_refused(tenant: Tenant, fake_llm: FakeLLM) -> None:
    """The stack allows 127.0.0.1/32 by address; 'localhost' is no allowed host name."""
    refused = call(tenant, "PUT", body(fake_llm,
                                       base_url=f"http://localhost:{fake_llm.port}/v1"))
    assert (refused.status_code, refused.json()["problem"]) == (422, "endpoint_not_allowed")
    assert fake_llm.seen == []


def test_an_unreachable_endpoint_is_named(tenant: Tenant) -> None:
    refused = call(tenant, "PUT", {"base_url": f"http://127.0.0.1:{closed_port()}/v1",
                                   "model": "m"})
    assert (refused.status_code, refused.json()["problem"]) == (422, "unreachable")


@pytest.mark.parametrize(("sent", "detail"), [
    ({"model": "m"}, "body.base_url: this field is required"),
    ({"base_url": "ftp://llm.example/v1", "model": "m"},
     "body.base_url: Value error, base_url must be an http:// or https:// URL with a host, "
     "like 'https://api.openai.com/v1'"),
    ({"base_url": f"https://api.openai.com/v1?key={KEY}", "model": "m"},
     "body.base_url: Value error, base_url must not carry a query or a fragment; send the key "
     "as api_key"),
    ({"base_url": f"https://u:{KEY}@api.openai.com/v1", "model": "m"},
     "body.base_url: Value error, base_url must not carry a user name or password; send the "
     "key as api_key"),
    ({"base_url": "https://api.openai.com/v1", "model": "has space"},
     "body.model: String should match pattern '^[\\x21-\\x7e]+$'"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "api_key": f"{KEY} x"},
     "body.api_key: Value error, api_key must be 1-4096 printable characters without spaces"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "timeout_seconds": 0},
     "body.timeout_seconds: Input should be greater than 0"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "max_retries": 11},
     "body.max_retries: Input should be less than or equal to 10"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "token_budget_per_run": 5},
     "body.token_budget_per_run: Input should be greater than or equal to 100"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "provider": "x"},
     "body.provider: Extra inputs are not permitted"),
], ids=["no-url", "ftp", "key-in-query", "key-in-userinfo", "model-space", "key-space",
        "timeout-0", "retries-11", "budget-5", "unknown-field"])
def test_bad_input_is_a_422_sentence(tenant: Tenant, sent: dict[str, Any], detail: str) -> None:
    refused = call(tenant, "PUT", sent)
    assert refused.status_code == 422
    assert refused.json()["detail"] == detail
    assert KEY not in refused.text
    assert call(tenant, "GET").json() == DEFAULT


def test_roles(tenant: Tenant, fake_llm: FakeLLM) -> None:
    agent, compliance = tenant.key("agent"), tenant.key("compliance")
    for method in ("PUT", "GET", "DELETE"):
        assert call(tenant, method, body(fake_llm), key=agent).status_code == 403
    assert call(tenant, "PUT", body(fake_llm), key=compliance).status_code == 403
    assert call(tenant, "DELETE", key=compliance).status_code == 403
    assert call(tenant, "GET", key=compliance).json() == DEFAULT
    assert fake_llm.seen == []
    assert call(tenant, "PUT", body(fake_llm)).status_code == 200
    assert call(tenant, "DELETE", key=compliance).status_code == 403
    assert call(tenant, "GET", key=compliance).json()["provider"] == "openai_compatible"
    with tenant.stack.http() as anonymous:
        assert anonymous.get("/v1/summarizer/config").status_code == 401


def test_tenants_are_isolated(tenant: Tenant, stack: Any, fake_llm: FakeLLM) -> None:
    other = stack.new_tenant()
    assert call(tenant, "PUT", body(fake_llm)).status_code == 200
    assert call(other, "GET").json() == DEFAULT
    assert call(other, "DELETE").json() == DEFAULT
    assert call(tenant, "GET").json()["provider"] == "openai_compatible"
    with stack.runtime.sessions() as session:
        assert isinstance(summarizer_for(session, stack.runtime, other.id, TokenBudget()),
                          ExtractiveSummarizer)
    assert audit_rows(other, "summarizer_config_write") == []


def test_the_key_is_never_stored_shown_logged_or_audited(
        tenant: Tenant, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts = [call(tenant, "PUT", body(fake_llm)).text, call(tenant, "GET").text]
    fake_llm.answer(llm.error(401))
    texts.append(call(tenant, "PUT", body(fake_llm)).text)
    with tenant.client() as client:
        details = " ".join(r.detail for r in client.audit.list(limit=200).items)
    assert "summarizer_config_write" in " ".join(
        r.operation for r in audit_rows(tenant, "summarizer_config_write"))
    assert KEY not in " ".join(texts)
    assert KEY not in details
    assert KEY not in caplog.text
    assert KEY not in _database_text(tenant)
    with tenant.stack.runtime.sessions() as session:
        sealed = session.scalar(select(SummarizerConfig.api_key_encrypted)
                                .where(SummarizerConfig.tenant_id == tenant.id))
    assert sealed is not None and KEY.encode() not in sealed
