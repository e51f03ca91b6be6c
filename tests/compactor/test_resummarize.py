"""POST /v1/compactor/resummarize over HTTP, on SQLite and PostgreSQL: a compactor entry is
written again (a new version) from the events it summarised, by the summariser the compactor
would use now; a replaced version of importance 5 keeps its decisions verbatim in a marked
list (the offline extractive summariser, exactly); unknown, foreign and out-of-scope entries
are 404; an entry whose events are gone is 409 and stays as it was; audited."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import fake_llm as llm
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

from .test_api_run import BODIES, _post_events, _run, _wait

HEADING = "Decisions kept from the replaced version (importance 5):"
HUMAN = "The board decided to freeze hiring until Q3."


@pytest.fixture
def chat() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def _compacted(http: httpx.Client, ref: str = "ent_acme") -> dict[str, Any]:
    _post_events(http, "entity", ref, BODIES, days_ago=200)
    _run(http)
    [entry] = http.get("/v1/entries", params={"scope": "entity",
                                              "scope_ref": ref}).json()["items"]
    full: dict[str, Any] = http.get(f"/v1/entries/{entry['id']}").json()
    return full


def _again(http: httpx.Client, entry_id: str) -> httpx.Response:
    return http.post("/v1/compactor/resummarize", json={"entry_id": entry_id})


def test_a_model_change_writes_a_new_version_from_the_provenance(tenant: Tenant,
                                                                 chat: FakeLLM) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = _compacted(http)
        assert (first["version"], first["importance"]) == (1, 4)
        assert http.put("/v1/summarizer/config", json={
            "base_url": chat.base_url, "model": "fake-model", "max_retries": 0}
                        ).status_code == 200
        chat.seen.clear()
        chat.answer(llm.ok("- Acme: ROAS target 4, 20% to Meta, renewal at $120k."))
        answer = _again(http, first["id"])
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "entry_id": first["id"], "version": 2, "event_count": 4,
            "provider": "openai_compatible", "model": "fake-model",
            "prompt_version": "compress-v1", "previous_provider": "memplane",
            "previous_model": "extractive-v1", "previous_prompt_version": "extract-v1",
            "decisions_kept": 0}
        [call] = chat.seen
        sent = "\n".join(m["content"] for m in call.json["messages"])
        assert all(body.split("\n")[-1] in sent for body in BODIES)
        now = http.get(f"/v1/entries/{first['id']}").json()
        assert (now["version"], now["summary"], now["title"], now["importance"],
                now["source"], now["tags"]) == (
            2, "- Acme: ROAS target 4, 20% to Meta, renewal at $120k.", first["title"], 4,
            "compactor", ["compacted"])
        trace = http.get(f"/v1/compactor/provenance/{first['id']}").json()
        assert (trace["model"], trace["event_count"], len(trace["events"])) == (
            "fake-model", 4, 4)
        rows = http.get("/v1/audit", params={"operation": "compact_resummarize"}).json()
        assert [(r["pointer_id"], r["detail"]) for r in rows["items"]] == [(
            first["id"], "entry v2 from 4 events by openai_compatible fake-model prompt "
            "compress-v1 (was memplane extractive-v1 prompt extract-v1); 0 decisions kept")]


def test_a_critical_entry_keeps_its_decisions_verbatim(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = _compacted(http)
        extractive = first["summary"]
        curated = extractive + f"\n- {HUMAN}\n- Lovely lunch with the team."
        for importance, expected in (
                (4, extractive),
                (5, f"{extractive}\n\n{HEADING}\n- {HUMAN}")):
            assert http.put(f"/v1/entries/{first['id']}", json={
                "title": first["title"], "summary": curated, "tags": ["compacted"],
                "importance": importance, "source": "manual"}).status_code == 200
            answer = _again(http, first["id"])
            assert answer.status_code == 200, answer.text
            assert answer.json()["decisions_kept"] == (1 if importance == 5 else 0)
            now = http.get(f"/v1/entries/{first['id']}").json()
            assert (now["summary"], now["importance"], now["source"]) == (
                expected, importance, "compactor")
        # Again: the kept list is not kept twice, nor the heading taken for a decision.
        assert _again(http, first["id"]).json()["decisions_kept"] == 1
        assert http.get(f"/v1/entries/{first['id']}").json()["summary"] == \
            f"{extractive}\n\n{HEADING}\n- {HUMAN}"


def test_unknown_foreign_and_out_of_scope_entries_are_404(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    with tenant.stack.http(other.admin_key) as http:
        foreign = _compacted(http)
    with tenant.stack.http(tenant.admin_key) as http:
        mine = _compacted(http, "ent_beta")
        curated = http.post("/v1/entries", json={"scope": "entity", "scope_ref": "ent_beta",
                                                 "title": "t", "summary": "s"}).json()
        scoped = http.post("/v1/api-keys", json={
            "role": "agent", "name": "acme bot",
            "scopes": [{"scope": "entity", "scope_ref": "ent_acme"}]}).json()["api_key"]
        for entry_id in (foreign["id"], curated["id"],
                         "00000000-0000-7000-8000-000000000000"):
            answer = _again(http, entry_id)
            assert (answer.status_code, answer.json()) == (404, {
                "error": "not_found", "detail": f"no compactor entry {entry_id}"})
        bad = http.post("/v1/compactor/resummarize", json={"entry_id": "nope"})
        assert bad.status_code == 422 and "entry_id" in bad.json()["detail"]
    with tenant.stack.http(tenant.admin_key) as http:
        acme = _compacted(http, "ent_acme")
    with tenant.stack.http(scoped) as http:
        answer = _again(http, mine["id"])
        assert (answer.status_code, answer.json()["detail"]) == (
            404, f"no compactor entry {mine['id']}")
        inside = _again(http, acme["id"])
        assert (inside.status_code, inside.json()["version"]) == (200, 2)
    with tenant.stack.http(tenant.key("compliance")) as http:
        assert _again(http, mine["id"]).status_code == 403
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get(f"/v1/entries/{mine['id']}").json()["version"] == 1


def test_an_entry_whose_events_are_gone_stays_as_it_was(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = _compacted(http)
        assert http.put("/v1/retention-policies", json={
            "scope": "entity", "memory_type": "event", "retention_days": 30,
            "auto_delete": True}).status_code == 200
        run = http.post("/v1/retention/run", json={})
        assert _wait(http, run.json()["id"])["state"] == "completed"
        answer = _again(http, first["id"])
        assert (answer.status_code, answer.json()) == (409, {
            "error": "provenance_gone",
            "detail": "4 of the 4 events this entry summarised are gone (erased, or deleted "
                      "by retention): it cannot be re-summarised, and its current version "
                      "stays"})
        now = http.get(f"/v1/entries/{first['id']}").json()
        assert (now["version"], now["summary"]) == (1, first["summary"])
        rows = http.get("/v1/audit", params={"operation": "compact_resummarize"}).json()
        assert [(r["success"], r["pointer_id"]) for r in rows["items"]] == [
            (False, first["id"])]
