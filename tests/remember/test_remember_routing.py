"""Remember follows the tenant's model routing: an ``extraction`` rule for the scope wins over
one for every scope, which wins over the summariser's endpoint (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

from .test_remember_api import said


@pytest.fixture
def chat() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def _rule(chat: FakeLLM, model: str, **more: str) -> dict[str, object]:
    return {"purpose": "extraction", "base_url": chat.base_url, "model": model,
            "timeout_seconds": 5, "max_retries": 0, **more}


def _added(key: str, value: str) -> llm.Answer:
    return llm.ok(json.dumps({"decisions": [
        {"event": "ADD", "key": key, "value": value, "seqs": [1]}]}))


def test_the_extraction_rule_of_the_scope_is_the_model_remember_asks(
        tenant: Tenant, chat: FakeLLM) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/summarizer/config", json={
            "base_url": chat.base_url, "model": "fallback-model", "timeout_seconds": 5,
            "max_retries": 0}).status_code == 200
        chat.answer(_added("uses.slack", "Slack"))
        said(http, user, "We chat on Slack.")
        assert chat.seen[-1].json["model"] == "fallback-model"

        routes = [_rule(chat, "every-scope-model"), _rule(chat, "user-model", scope="user")]
        assert http.put("/v1/model-routes", json={"rules": routes}).status_code == 200
        chat.answer(_added("uses.jira", "Jira"))
        said(http, user, "We track work in Jira.")
        assert chat.seen[-1].json["model"] == "user-model"

        chat.answer(_added("uses.zoom", "Zoom"))
        answer = http.post("/v1/remember", json={
            "messages": [{"role": "user", "content": "Our team meets on Zoom."}],
            "user_id": user, "scope": "team", "scope_ref": "t-1"})
        assert answer.status_code == 200, answer.text
        assert chat.seen[-1].json["model"] == "every-scope-model"
        assert answer.json()["model"] == "every-scope-model"
