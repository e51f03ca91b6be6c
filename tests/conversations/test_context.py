"""Context assembly over HTTP on SQLite and PostgreSQL: priority order within the budget,
exact token totals, the 422 when the fixed parts alone exceed it, entries in and compressed
events never loaded, the summary standing for older messages, one audit row of counts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select, update

from control_plane.conversations import tokens
from control_plane.db.models import AccessLog, MemoryEvent
from control_plane.search import indexer
from tests.support.service import Tenant

from .test_messages import _add, _job_done

GPT4O = tokens.for_model("gpt-4o")


def _context(http: httpx.Client, conv: str, **body: Any) -> httpx.Response:
    return http.post(f"/v1/conversations/{conv}/context",
                     json={"system_prompt": "You are helpful.", "message": "hello world"}
                     | body)


def test_fixed_parts_over_budget_is_422_saying_by_how_much(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    fixed = GPT4O.message("You are helpful.") + GPT4O.message("hello world")  # 8 + 6
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "earlier")
        over = _context(http, conv, token_budget=fixed - 1)
        exact = _context(http, conv, token_budget=fixed)
    assert fixed == 14
    assert over.status_code == 422
    assert over.json()["detail"] == (
        "the system prompt (8 tokens) and the message (6 tokens) alone take 14 tokens, 1 over "
        "the token_budget of 13; raise token_budget or shorten them")
    assert exact.status_code == 200, exact.text
    body = exact.json()
    assert [s["kind"] for s in body["sections"]] == ["system_prompt", "current_message"]
    assert body["total_tokens"] == 14
    assert [(r["kind"], r["id"], r["status"], r["reason"]) for r in body["report"]] == [
        ("system_prompt", "system_prompt", "included", None),
        ("current_message", "current_message", "included", None),
        ("message", "1", "dropped", "budget")]


def test_recent_messages_fill_newest_first_and_keep_their_order(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    texts = [f"message number {i}" for i in range(1, 6)]
    costs = [GPT4O.message(t) for t in texts]
    with tenant.stack.http(tenant.admin_key) as http:
        for i, text in enumerate(texts):
            _add(http, conv, text, role="user" if i % 2 == 0 else "assistant")
        budget = 14 + costs[4] + costs[3] + costs[2] + 1  # room for three, not four
        body = _context(http, conv, token_budget=budget).json()
    assert [(s["role"], s["content"]) for s in body["sections"]] == [
        ("system", "You are helpful."), ("user", texts[2]), ("assistant", texts[3]),
        ("user", texts[4]), ("user", "hello world")]
    assert body["total_tokens"] == budget - 1
    assert body["total_tokens"] == sum(s["tokens"] for s in body["sections"])
    status = {r["id"]: (r["status"], r["reason"]) for r in body["report"]
              if r["kind"] == "message"}
    assert status == {"5": ("included", None), "4": ("included", None),
                      "3": ("included", None), "2": ("dropped", "budget"),
                      "1": ("dropped", "budget")}
    assert body["tokens_by_kind"] == {"system_prompt": 8, "message": sum(costs[2:]),
                                      "current_message": 6}


def test_entries_and_uncompressed_events_in_compressed_never_loaded(tenant: Tenant) -> None:
    conv, ref = f"c-{uuid.uuid4().hex[:8]}", f"ent-{uuid.uuid4().hex[:6]}"
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "what did Acme decide?")
        entry = http.post("/v1/entries", json={
            "scope": "entity", "scope_ref": ref, "title": "Acme", "importance": 5,
            "summary": "Acme agreed a ROAS target of 4."}).json()
        low = http.post("/v1/entries", json={
            "scope": "entity", "scope_ref": ref, "title": "Lunch", "importance": 1,
            "summary": "Lunch was nice."}).json()
        fresh = http.post("/v1/events", json={
            "scope": "entity", "scope_ref": ref, "kind": "decision",
            "body": "Budget moved to Meta.", "occurred_at": "2026-11-01T10:00:00Z"}).json()
        old = http.post("/v1/events", json={
            "scope": "entity", "scope_ref": ref, "kind": "decision",
            "body": "COMPRESSED-BODY", "occurred_at": "2026-01-01T10:00:00Z"}).json()
        with tenant.stack.engine.begin() as conn:  # as the compactor marks them
            conn.execute(update(MemoryEvent).where(MemoryEvent.id == uuid.UUID(old["id"]))
                         .values(compressed_at=datetime.now(UTC)))
        body = _context(http, conv, token_budget=1000,
                        memory_scopes=[{"scope": "entity", "scope_ref": ref}]).json()
    memory = [s for s in body["sections"] if s["kind"] == "memory"]
    assert len(memory) == 1
    assert memory[0]["content"] == (
        "Relevant memory:\n- Acme: Acme agreed a ROAS target of 4.\n- Lunch: Lunch was nice."
        "\n- 2026-11-01 (decision): Budget moved to Meta.")
    assert memory[0]["tokens"] == GPT4O.message(memory[0]["content"])
    assert "COMPRESSED-BODY" not in str(body)
    report = {(r["kind"], r["id"]): (r["status"], r["reason"]) for r in body["report"]}
    assert report[("entry", entry["id"])] == ("included", None)
    assert report[("entry", low["id"])] == ("included", None)
    assert report[("event", fresh["id"])] == ("included", None)
    assert report[("event", old["id"])] == ("dropped", "compressed")
    assert [s["kind"] for s in body["sections"]] == [
        "system_prompt", "memory", "message", "current_message"]
    assert body["total_tokens"] == sum(s["tokens"] for s in body["sections"])
    with tenant.stack.engine.connect() as conn:
        rows = conn.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "context")).all()
    assert rows == [f"conversation context: {body['total_tokens']}/1000 tokens, 6 included, "
                    "0 summarized, 1 dropped"]


def test_summary_stands_for_older_messages_and_is_cut_to_fit(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    line = "We agreed to move 20% of the budget to Meta on Friday."
    cost = GPT4O.message(line)
    with tenant.stack.http(tenant.admin_key) as http:
        for _ in range(8):  # 8 × 19 = 152 tokens, under the 204 that would flip the flag
            _add(http, conv, line, context_window_limit=256)
        _job_done(http, http.post(f"/v1/conversations/{conv}/summarize").json()["id"])
        state = http.get(f"/v1/conversations/{conv}").json()
        roomy = _context(http, conv, token_budget=2000).json()
        tight = _context(http, conv, token_budget=14 + 3 * cost + 12).json()
        starved = _context(http, conv, token_budget=14 + 3 * cost).json()
    # The newest 3 messages (57 tokens) fit in the kept quarter of 256; 1 to 5 are summarised.
    assert (cost, state["summarized_through"], state["context_window_tokens"]) == (19, 5, 57)
    assert [s["kind"] for s in roomy["sections"]] == [
        "system_prompt", "older_context", "message", "message", "message", "current_message"]
    assert roomy["sections"][1]["content"].startswith("Summary of the earlier conversation:\n")
    report = [(r["kind"], r["id"], r["status"], r["reason"]) for r in roomy["report"]
              if r["kind"] in ("message", "summary")]
    summary_id = state["summary_pointer_id"]
    assert report == [("message", "8", "included", None), ("message", "7", "included", None),
                      ("message", "6", "included", None),
                      ("summary", summary_id, "included", None)] + [
        ("message", str(i), "summarized", "superseded_by_summary") for i in range(1, 6)]
    assert roomy["total_tokens"] == sum(s["tokens"] for s in roomy["sections"])
    cut = [r for r in tight["report"] if r["kind"] == "summary"]
    assert [(r["status"], r["reason"]) for r in cut] == [("included", "truncated_to_budget")]
    assert tight["total_tokens"] <= tight["token_budget"]
    assert tight["total_tokens"] == sum(s["tokens"] for s in tight["sections"])
    assert [(r["status"], r["reason"]) for r in starved["report"] if r["kind"] == "summary"] == [
        ("dropped", "budget")]
    assert [r["status"] for r in starved["report"] if r["kind"] == "message"] == [
        "included"] * 3 + ["dropped"] * 5


def test_relevant_memories_come_from_semantic_search(tenant: Tenant) -> None:
    conv, user = f"c-{uuid.uuid4().hex[:8]}", f"u-{uuid.uuid4().hex[:6]}"
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "hi", user_id=user)
        seat = http.put(f"/v1/memories/user/{user}/seat",
                        json={"value": "Prefers a window seat on long flights."}).json()
        http.put(f"/v1/memories/user/{user}/food", json={"value": "Vegetarian meals."})
        runtime = tenant.stack.runtime
        with runtime.sessions() as session:  # the indexer's round, as its thread runs it
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        body = _context(http, conv, token_budget=1000, message="Book a window seat please",
                        memory_scopes=[{"scope": "user", "scope_ref": user}],
                        memory_limit=1).json()
    (memory,) = [s for s in body["sections"] if s["kind"] == "memory"]
    assert memory["content"] == "Relevant memory:\n- Prefers a window seat on long flights."
    assert [(r["id"], r["status"]) for r in body["report"] if r["kind"] == "memory"] == [
        (seat["id"], "included")]
