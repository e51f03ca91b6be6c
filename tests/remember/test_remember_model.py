"""Remember through the tenant's model endpoint (a small real chat server, scripted), and
after a conversation message with ``"remember": true`` (a job), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from control_plane.db.models import Job
from tests.conversations.test_messages import _add, _job_done
from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

from .test_remember_api import events, pointers, said


@pytest.fixture
def chat() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def configure(http: httpx.Client, chat: FakeLLM, **fields: Any) -> None:
    answer = http.put("/v1/summarizer/config", json={
        "base_url": chat.base_url, "model": "fake-model", "api_key": "sk-" + "k" * 40,
        "timeout_seconds": 5, "max_retries": 0, **fields})
    assert answer.status_code == 200, answer.text


def decided(*decisions: dict[str, Any]) -> llm.Answer:
    return llm.ok(json.dumps({"decisions": list(decisions)}))


def test_the_model_decides_and_its_answer_is_checked(tenant: Tenant, chat: FakeLLM) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        configure(http, chat)
        chat.answer(decided(
            {"event": "ADD", "key": "preference.response_format", "value": "bullet points",
             "seqs": [1], "reason": "stated preference"},
            {"event": "ADD", "key": "uses.slack", "value": "Slack", "seqs": [1]}))
        first = said(http, user, "Bullet points please; we chat on Slack.",
                     conversation_id="c-9")
        chat.answer(decided(
            {"event": "UPDATE", "key": "preference.response_format",
             "value": "numbered lists", "seqs": [1]},
            {"event": "DELETE", "key": "uses.slack", "seqs": [2],
             "reason": "dropped; also gave card 4111 1111 1111 1111"},
            {"event": "ADD", "key": "about.card", "value": "4111 1111 1111 1111",
             "seqs": [2]}))
        second = said(http, user, "Numbered lists from now on.", "We dropped Slack.",
                      "my card is 4111 1111 1111 1111")
        stored = http.get(f"/v1/memories/user/{user}/preference.response_format").json()
    assert events(first) == [
        ("ADD", "preference.response_format", "bullet points", None, "stated preference"),
        ("ADD", "uses.slack", "Slack", None, "new fact")]
    assert (first["extractor"], first["model"]) == ("model-v1", "fake-model")
    assert events(second) == [
        ("UPDATE", "preference.response_format", "numbered lists", "bullet points",
         "changed"),
        ("DELETE", "uses.slack", None, "Slack", "retracted"),
        ("NONE", "about.card", None, None, "sensitive:card")]
    # The second call showed the model what was stored, and the new messages by seq.
    prompt = chat.seen[-1].json["messages"][1]["content"]
    assert prompt == ("Stored memories:\n- preference.response_format = bullet points\n"
                      "- uses.slack = Slack\n\nNew messages:\n"
                      "[1] user: Numbered lists from now on.\n[2] user: We dropped Slack.\n"
                      "[3] user: my card is [redacted:card]")
    assert chat.seen[-1].json["model"] == "fake-model"
    assert stored["pointer"]["tags"] == ["remember", "extractor:model-v1", "seqs:1",
                                         "model:fake-model"]
    assert stored["value"]["provenance"] == {"conversation_id": None, "message_seqs": [1],
                                             "extractor": "model-v1", "model": "fake-model"}
    assert sorted(pointers(tenant, user)) == ["preference.response_format"]


@pytest.mark.parametrize("answer", [
    llm.ok("I think the user likes bullet points."),
    decided({"event": "ADD", "key": "Preference Format", "value": "x", "seqs": [1]}),
    decided({"event": "ADD", "key": "uses.slack", "seqs": [1]}),
    decided({"event": "ADD", "key": "uses.slack", "value": "Slack", "seqs": [7]}),
    decided({"event": "ADD", "key": "about.phone-5550109", "value": "x", "seqs": [1]}),
    llm.server_error(),
], ids=["prose", "bad-key", "no-value", "unknown-seq", "number-in-key", "server-error"])
def test_an_unusable_answer_falls_back_to_the_rules(tenant: Tenant, chat: FakeLLM,
                                                    answer: llm.Answer) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        configure(http, chat)
        chat.answer(answer)
        result = said(http, user, "I prefer responses in bullet points.")
    code = "server_error" if answer.status == 500 else "malformed_answer"
    assert events(result) == [
        ("ADD", "preference.response_format", "bullet points", None,
         f"new fact (the model failed: {code}; built-in extractor used)")]
    assert (result["extractor"], result["model"]) == ("builtin-v1", None)
    assert llm.REMOTE_SECRET not in json.dumps(result)
    assert sorted(pointers(tenant, user)) == ["preference.response_format"]


def test_the_token_budget_holds_and_nothing_is_sent(tenant: Tenant, chat: FakeLLM) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        configure(http, chat, token_budget_per_run=100)  # under one call's estimate
        result = said(http, user, "I use Figma.")
    assert events(result) == [("ADD", "uses.figma", "Figma", None, "new fact (the model "
                               "failed: token_budget_spent; built-in extractor used)")]
    # Only the configuration's probe reached the endpoint.
    assert [seen.json["messages"] for seen in chat.seen] == [
        [{"role": "user", "content": "Reply with: ok"}]]


def test_a_message_with_remember_queues_a_job(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        plain = _add(http, conv, "I use Slack for everything.", user_id=user)
        _add(http, conv, "Noted!", role="assistant")
        asked = _add(http, conv, "I prefer responses in bullet points.", remember=True)
        job = _job_done(http, asked["remember_job_id"])
        stored = http.get(f"/v1/memories/user/{user}/preference.response_format").json()
        slack = http.get(f"/v1/memories/user/{user}/uses.slack").json()
        again = _job_done(http, _add(http, conv, "I don't use Slack anymore",
                                     remember=True)["remember_job_id"])
        nobody = _add(http, f"{conv}-anon", "I use Slack.", remember=True)
    assert (plain["remember_job_id"], nobody["remember_job_id"]) == (None, None)
    assert job["state"] == "completed"
    assert job["result"] == {"remembered": True, "extractor": "builtin-v1", "messages": 3,
                             "add": 2, "update": 0, "delete": 0, "none": 0}
    assert again["result"] == {"remembered": True, "extractor": "builtin-v1", "messages": 4,
                               "add": 0, "update": 0, "delete": 1, "none": 1}
    assert stored["value"]["provenance"] == {"conversation_id": conv, "message_seqs": [3],
                                             "extractor": "builtin-v1", "model": None}
    assert slack["value"]["provenance"]["message_seqs"] == [1]
    assert stored["pointer"]["tags"][-1] == f"conversation:{conv}"
    assert sorted(pointers(tenant, user)) == ["preference.response_format"]
    with tenant.stack.engine.connect() as conn:
        params = conn.execute(select(Job.params).where(
            Job.id == uuid.UUID(asked["remember_job_id"]))).scalar_one()
    assert set(params) == {"conversation", "through"} and params["through"] == 3


def test_remember_needs_a_key_that_reaches_the_user(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="s", scopes=[
            {"scope": "conversation", "scope_ref": conv}]).api_key
    with tenant.stack.http(scoped) as http:
        refused = http.post(f"/v1/conversations/{conv}/messages", json={
            "role": "user", "content": "I use Slack.", "user_id": "u-1", "remember": True})
        plain = http.post(f"/v1/conversations/{conv}/messages", json={
            "role": "user", "content": "I use Slack.", "user_id": "u-1"})
    assert refused.status_code == 403
    assert "remember writes the user's memory" in refused.json()["detail"]
    assert plain.status_code == 201
