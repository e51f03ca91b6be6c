"""Conversation summaries by the tenant's OpenAI-compatible endpoint (a small real chat
server started here), on SQLite and PostgreSQL: a failing call changes nothing and the next
try succeeds; the second summary is built on the first (it goes first into the call); no
remote body reaches the job, the audit log or the answer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from control_plane.db.models import AccessLog
from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

from .test_messages import _add, _job_done


@pytest.fixture
def chat() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


LINE = "We agreed to move 20% of the budget to Meta on Friday."  # 19 tokens with framing


def test_failure_changes_nothing_then_summaries_roll_forward(tenant: Tenant,
                                                             chat: FakeLLM) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        configured = http.put("/v1/summarizer/config", json={
            "base_url": chat.base_url, "model": "fake-model", "api_key": "sk-" + "k" * 40,
            "timeout_seconds": 5, "max_retries": 0})
        assert configured.status_code == 200, configured.text
        for _ in range(10):  # 190 tokens: under the 204 that flips the flag at limit 256
            _add(http, conv, LINE, context_window_limit=256)
        before = http.get(f"/v1/conversations/{conv}").json()
        chat.answer(llm.server_error())
        failed = _job_done(http, http.post(f"/v1/conversations/{conv}/summarize").json()["id"])
        unchanged = http.get(f"/v1/conversations/{conv}").json()
        chat.answer(llm.ok("- Budget moves to Meta on Friday."))
        first = _job_done(http, http.post(f"/v1/conversations/{conv}/summarize").json()["id"])
        after_first = http.get(f"/v1/conversations/{conv}").json()
        for _ in range(4):
            _add(http, conv, LINE)
        chat.answer(llm.ok("- Budget moves to Meta on Friday, confirmed four times."))
        second = _job_done(http, http.post(f"/v1/conversations/{conv}/summarize").json()["id"])
        summary = http.get(f"/v1/memories/conversation/{conv}/summary").json()["value"]
        audit = http.get("/v1/audit", params={"limit": 1000}).text
    assert failed["state"] == "completed"
    assert failed["result"] == {"summarized": False, "reason": "server_error"}
    assert {k: unchanged[k] for k in ("summarized_through", "context_window_tokens",
                                      "summary_pointer_id", "updated_at")} == {
        k: before[k] for k in ("summarized_through", "context_window_tokens",
                               "summary_pointer_id", "updated_at")}
    assert unchanged["summary_job_id"] is None
    # Keep 64 tokens: the newest 3 messages (57); 7 are summarised.
    assert (first["result"]["messages"], after_first["summarized_through"],
            after_first["context_window_tokens"]) == (7, 7, 57)
    assert first["result"]["provider"] == "openai_compatible"
    assert (second["result"]["messages"], second["result"]["summarized_through"]) == (4, 11)
    assert summary["text"] == "- Budget moves to Meta on Friday, confirmed four times."
    assert summary["through"] == 11
    last_call = chat.seen[-1].json["messages"][1]["content"]
    assert "- Budget moves to Meta on Friday." in last_call
    assert last_call.index("- Budget moves to Meta on Friday.") < last_call.index(LINE)
    assert last_call.count(LINE) == 4
    assert llm.REMOTE_SECRET not in audit and llm.REMOTE_SECRET not in str(failed)
    with tenant.stack.engine.connect() as conn:
        rows = conn.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "summarize",
            AccessLog.success.is_(False))).all()
    assert rows == ["conversation: summariser failed (server_error); nothing changed"]
