"""The compactor under the tenant's own OpenAI-compatible summariser (a small real chat server
started here): a bucket whose call fails marks nothing and is compacted on the next run; the
entry's provenance names the tenant's model; a spent token budget ends the run cleanly."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

from .test_api_run import _run


@pytest.fixture
def chat() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def _configure(http: httpx.Client, chat: FakeLLM, **changes: Any) -> None:
    body = {"base_url": chat.base_url, "model": "fake-model", "api_key": "sk-" + "k" * 40,
            "timeout_seconds": 5, "max_retries": 0, "token_budget_per_run": 100_000} | changes
    response = http.put("/v1/summarizer/config", json=body)  # probed: one call answered ok
    assert response.status_code == 200, response.text


def _events(http: httpx.Client, scope: str, ref: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        when = datetime.now(UTC) - timedelta(days=200 - i)
        response = http.post("/v1/events", json={
            "scope": scope, "scope_ref": ref, "kind": "decision",
            "body": f"We agreed on step {i} for {ref}.", "occurred_at": when.isoformat()})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def _compressed(http: httpx.Client, scope: str, ref: str) -> set[str]:
    items = http.get("/v1/events", params={"scope": scope, "scope_ref": ref,
                                           "include_compressed": "true"}).json()["items"]
    return {e["id"] for e in items if e["compressed_at"] is not None}


def test_a_failing_endpoint_leaves_its_bucket_for_the_next_run(tenant: Tenant,
                                                               chat: FakeLLM) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _configure(http, chat)
        acme = _events(http, "entity", "ent_acme", 3)
        p1 = _events(http, "project", "p1", 3)
        # Buckets are summarised in (scope, scope ref) order: entity/ent_acme first.
        chat.answer(llm.server_error(), llm.ok("- Steps 0 to 2 agreed for p1."))
        first = _run(http)["result"]
        assert (first["compacted_buckets"], first["failed_buckets"], first["failures"],
                first["events_compressed"]) == (1, 1, {"server_error": 1}, 3)
        assert _compressed(http, "entity", "ent_acme") == set()
        assert _compressed(http, "project", "p1") == set(p1)

        chat.answer(llm.ok("- Steps 0 to 2 agreed for Acme."))
        second = _run(http)["result"]
        assert (second["buckets"], second["compacted_buckets"], second["failed_buckets"]) == \
            (1, 1, 0)
        assert _compressed(http, "entity", "ent_acme") == set(acme)
        [entry] = http.get("/v1/entries", params={"scope": "entity",
                                                  "scope_ref": "ent_acme"}).json()["items"]
        assert http.get(f"/v1/entries/{entry['id']}").json()["summary"] == \
            "- Steps 0 to 2 agreed for Acme."
        trace = http.get(f"/v1/compactor/provenance/{entry['id']}").json()
        assert (trace["provider"], trace["model"]) == ("openai_compatible", "fake-model")
        assert [e["event_id"] for e in trace["events"]] == acme


def test_a_spent_token_budget_ends_the_run_cleanly(tenant: Tenant, chat: FakeLLM) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        # The probe is not charged to a run; each call below reports 900 tokens used.
        _configure(http, chat, token_budget_per_run=2000)  # one call fits, not two
        _events(http, "entity", "ent_acme", 3)
        _events(http, "project", "p1", 3)
        chat.answer(llm.ok("- Acme agreed.", total_tokens=900),
                    llm.ok("- p1 agreed.", total_tokens=900))
        result = _run(http)["result"]
        assert (result["budget_spent"], result["compacted_buckets"],
                result["failed_buckets"]) == (True, 1, 0)
        assert _compressed(http, "project", "p1") == set()


def test_a_deeply_nested_answer_fails_its_bucket_not_the_run(tenant: Tenant,
                                                              chat: FakeLLM) -> None:
    """Was a RecursionError that failed the whole job attempt."""
    answer = b"[" * (1024 * 1024 - 1)
    with tenant.stack.http(tenant.admin_key) as http:
        _configure(http, chat)
        _events(http, "entity", "ent_acme", 3)
        p1 = _events(http, "project", "p1", 3)
        chat.answer(llm.Answer(200, answer, {"Content-Type": "application/json"}),
                    llm.ok("- Steps 0 to 2 agreed for p1."))
        result = _run(http)["result"]
        assert (result["compacted_buckets"], result["failed_buckets"], result["failures"],
                result["events_compressed"]) == (1, 1, {"malformed_answer": 1}, 3)
        assert _compressed(http, "entity", "ent_acme") == set()
        assert _compressed(http, "project", "p1") == set(p1)
