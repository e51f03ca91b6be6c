"""The memory-quality bench on a slice of its dataset (two users, every kind of statement:
facts, changes, retractions, a card number, an SSN, a password), on the live service, SQLite
and PostgreSQL: its bars hold for the built-in extractor and for the scripted model endpoint,
and its dataset is sound. Quality only — no timing is asserted."""

from __future__ import annotations

from dataclasses import replace

import httpx

from bench.bars import bars
from bench.memory_quality import Score, results_of, run_extractor
from bench.memory_quality_data import (
    USERS,
    Change,
    Fact,
    Retract,
    Sensitive,
    luhn_ok,
    problems,
    statements,
)
from bench.scripted_llm import MODEL, ScriptedModel
from control_plane.search import indexer
from tests.support.service import Tenant

SLICE = USERS[:2]


def _settle(tenant: Tenant) -> None:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:  # the indexer's round, as its thread runs it
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)


def _run(tenant: Tenant, extractor: str, scripted: ScriptedModel | None = None,
         via_messages: bool = False) -> Score:
    with httpx.Client(base_url=tenant.stack.base_url, timeout=60,
                      headers={"Authorization": f"Bearer {tenant.admin_key}"}) as http:
        if scripted is not None:
            answer = http.put("/v1/summarizer/config", json={
                "base_url": scripted.base_url, "model": MODEL, "timeout_seconds": 10,
                "max_retries": 0, "token_budget_per_run": 1_000_000})
            assert answer.status_code == 200, answer.text
        return run_extractor(http, extractor, users=SLICE, settle=lambda: _settle(tenant),
                             via_messages=via_messages)


def _held(score: Score) -> dict[str, bool]:
    return {bar.name.rsplit("/", 1)[1]: bar.holds for bar in bars(results_of([score]))}


def test_the_dataset_is_sound_and_large_enough() -> None:
    said = statements()
    assert problems() == []
    assert (sum(isinstance(s, Fact) for s in said), sum(isinstance(s, Change) for s in said),
            sum(isinstance(s, Retract) for s in said)) == (45, 8, 5)
    assert sorted(s.kind for s in said if isinstance(s, Sensitive)) == [
        "card", "card", "password", "password", "ssn", "ssn"]
    assert all(luhn_ok(s.secret) for s in said if isinstance(s, Sensitive) and s.kind == "card")
    # The check finds a question holding its answer and a stale value still in a fact.
    broken = replace(USERS[0], sessions=[
        [Fact("laptop", "My laptop is a ThinkPad.", "ThinkPad", "Is it a ThinkPad?", "device")],
        [Change("laptop", "My laptop is now a MacBook, not a ThinkPad.", "MacBook")]])
    assert problems([broken]) == [
        "ana/laptop: the question holds it",
        "ana: stale 'ThinkPad' is in 'My laptop is now a MacBook, not a ThinkPad.'"]


def test_the_offline_extractor_holds_the_bars(tenant: Tenant) -> None:
    score = _run(tenant, "offline")
    assert score.statements == 22 and score.changes == 6 and score.probes > 30
    assert _held(score) == {"captured": True, "stale_after_update": True,
                            "sensitive_stored": True}, score.misses
    assert score.captured / score.statements >= 0.8
    assert (score.stale_after_update, score.sensitive_stored) == (0, 0)
    assert score.events["ADD"] >= 15 and score.events["UPDATE"] >= 1


def test_messages_sent_with_remember_hold_the_bars(tenant: Tenant) -> None:
    score = _run(tenant, "offline-messages", via_messages=True)
    assert _held(score) == {"captured": True, "stale_after_update": True,
                            "sensitive_stored": True}, score.misses
    assert score.events["ADD"] >= 15 and score.events["UPDATE"] >= 1
    # The transcripts keep the user's words, flagged (the default DLP mode for messages).
    assert score.sensitive_in_transcript == 3


def test_the_scripted_model_endpoint_holds_the_bars(tenant: Tenant) -> None:
    with ScriptedModel(SLICE) as scripted:
        score = _run(tenant, "model-scripted", scripted)
    assert scripted.calls == 6  # three sessions with statements, two users
    assert scripted.secrets_seen == set()  # detected values reach the model redacted
    assert _held(score) == {"captured": True, "stale_after_update": True,
                            "sensitive_stored": True}, score.misses
    # A perfect extractor: every statement captured, every change applied, every question
    # answered from the context with the current value only.
    assert (score.captured, score.applied, score.hits) == (22, 6, score.probes), score.misses
    assert score.events["UPDATE"] == 4 and score.events["DELETE"] == 2
