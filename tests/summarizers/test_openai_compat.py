"""The OpenAI-compatible summariser against a small real HTTP server (tests/support/
fake_llm.py): the request it sends, retries with backoff and Retry-After, timeouts,
malformed answers, the token budget, and the endpoint guard."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.summarizers import (
    BudgetSpent,
    EventText,
    Summarizer,
    SummarizerFailed,
    TokenBudget,
)
from control_plane.summarizers import prompt as compression
from control_plane.summarizers.openai_compat import (
    OpenAICompatibleSummarizer,
    retry_after_seconds,
)
from control_plane.summarizers.prompt import PROMPT_VERSION, SYSTEM
from storage_adapters.netguard import EndpointPolicy
from tests.support import fake_llm as llm
from tests.support.fake_llm import REMOTE_SECRET, FakeLLM

KEY = "sk-test-" + "k" * 40
LOOPBACK = EndpointPolicy.from_entries(["127.0.0.1/32"])
EVENTS = [
    EventText(uuid.UUID(int=1), "call_summary", datetime(2025, 1, 5, 9, 30, tzinfo=UTC),
              "Call with Acme. We agreed to move 20% of spend to Meta."),
    EventText(uuid.UUID(int=2), "decision", datetime(2025, 1, 12, 14, 0, tzinfo=UTC),
              "Jordan approved the Q2 budget of $40k."),
    EventText(uuid.UUID(int=3), "call_summary", datetime(2025, 2, 1, 8, 0, tzinfo=UTC),
              "Small talk. Priya will own the dashboard."),
]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def summarizer(server: FakeLLM, sleeps: Sleeps | None = None, **options: Any
               ) -> OpenAICompatibleSummarizer:
    values: dict[str, Any] = dict(base_url=server.base_url, model="fake-model", api_key=KEY,
                                  policy=LOOPBACK, timeout_seconds=5, max_retries=2,
                                  sleep=sleeps if sleeps is not None else Sleeps())
    values.update(options)
    return OpenAICompatibleSummarizer(**values)


def test_sends_the_versioned_prompt_and_returns_the_summary(fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.ok("## Decisions\n- Spend moves to Meta.\n", total_tokens=321))
    budget = TokenBudget(100_000)
    s = summarizer(fake_llm, budget=budget)
    assert isinstance(s, Summarizer)
    summary = s.summarize("entity", "ent_acme", EVENTS)
    assert (summary.text, summary.provider, summary.model, summary.prompt_version,
            summary.tokens_used) == ("## Decisions\n- Spend moves to Meta.",
                                     "openai_compatible", "fake-model", "compress-v1", 321)
    assert PROMPT_VERSION == "compress-v1"
    assert budget.spent == 321
    [seen] = fake_llm.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert seen.json["model"] == "fake-model"
    assert seen.json["max_tokens"] == 1024
    assert seen.json["temperature"] == 0
    system, user = seen.json["messages"]
    assert system == {"role": "system", "content": SYSTEM.format(
        scope="entity", scope_ref="ent_acme", max_words=400)}
    assert "preserves every strategic decision" in system["content"]
    assert "relationship dynamic" in system["content"]
    assert "recurring pattern" in system["content"]
    assert "Drop the meeting-by-meeting prose" in system["content"]
    assert user == {"role": "user", "content": (
        "### 2025-01-05 09:30 UTC, call_summary\n"
        "Call with Acme. We agreed to move 20% of spend to Meta.\n\n"
        "### 2025-01-12 14:00 UTC, decision\n"
        "Jordan approved the Q2 budget of $40k.\n\n"
        "### 2025-02-01 08:00 UTC, call_summary\n"
        "Small talk. Priya will own the dashboard.\n")}


def test_no_key_sends_no_authorization(fake_llm: FakeLLM) -> None:
    summarizer(fake_llm, api_key=None).summarize("entity", "e", EVENTS)
    assert "Authorization" not in fake_llm.seen[0].headers


def test_429_waits_what_retry_after_says_capped(fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.rate_limited("7"), llm.rate_limited("3600"), llm.ok("- fine"))
    sleeps = Sleeps()
    summary = summarizer(fake_llm, sleeps, max_retry_wait=30).summarize("entity", "e", EVENTS)
    assert summary.text == "- fine"
    assert sleeps == [7.0, 30.0]
    assert len(fake_llm.seen) == 3


def test_429_without_retry_after_backs_off_and_gives_up(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.rate_limited(None)
    sleeps = Sleeps()
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm, sleeps, max_retries=3).summarize("entity", "e", EVENTS)
    assert failed.value.code == "rate_limited"
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(fake_llm.seen) == 4


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("Thu, 01 Jan 2026 12:00:09 GMT", lambda: now) == 9.0
    assert retry_after_seconds("Thu, 01 Jan 2026 11:00:00 GMT", lambda: now) == 0.0
    assert retry_after_seconds("soon", lambda: now) is None
    assert retry_after_seconds("nan", lambda: now) is None


def test_500_is_retried_then_succeeds(fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.server_error(), llm.error(503), llm.ok("- recovered"))
    sleeps = Sleeps()
    assert summarizer(fake_llm, sleeps).summarize("entity", "e", EVENTS).text == "- recovered"
    assert sleeps == [0.5, 1.0]


def test_500_exhausted_fails_the_bucket(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.server_error()
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm, max_retries=1).summarize("entity", "e", EVENTS)
    assert failed.value.code == "server_error"
    assert str(failed.value) == "the summariser endpoint kept failing with a server error"
    assert len(fake_llm.seen) == 2


def test_timeout_is_retried_then_fails(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.stall()
    sleeps = Sleeps()
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm, sleeps, timeout_seconds=0.2, max_retries=1).summarize(
            "entity", "e", EVENTS)
    assert failed.value.code == "timeout"
    assert sleeps == [0.5]
    assert len(fake_llm.seen) == 2


def test_timeout_then_answer(fake_llm: FakeLLM) -> None:
    """The stalled first answer never comes; the timeout must still leave the prompt second
    answer time to arrive on a loaded machine (one retry only: a third call would show)."""
    fake_llm.answer(llm.stall(), llm.ok("- second try"))
    assert summarizer(fake_llm, timeout_seconds=2, max_retries=1).summarize(
        "entity", "e", EVENTS).text == "- second try"
    assert len(fake_llm.seen) == 2


def test_a_trickling_answer_is_cut_off(fake_llm: FakeLLM) -> None:
    """Each read arrives within the 0.2 s timeout, but the whole answer would take seconds:
    the attempt is cut off at twice the timeout."""
    fake_llm.answer(llm.trickle())
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm, timeout_seconds=0.2, max_retries=0).summarize(
            "entity", "e", EVENTS)
    assert failed.value.code == "timeout"


@pytest.mark.parametrize(("status", "code"), [(401, "auth_failed"), (403, "auth_failed"),
                                              (404, "endpoint_refused"),
                                              (400, "endpoint_refused"),
                                              (302, "endpoint_refused")])
def test_refusals_fail_at_once(fake_llm: FakeLLM, status: int, code: str) -> None:
    fake_llm.default = llm.error(status, {"Location": "http://169.254.169.254/"})
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm).summarize("entity", "e", EVENTS)
    assert failed.value.code == code
    assert len(fake_llm.seen) == 1  # neither retried nor redirected


@pytest.mark.parametrize("answer", [llm.not_json(), llm.no_choices(), llm.empty_content(),
                                    llm.Answer(200, b'{"choices": [{"message": null}]}'),
                                    llm.Answer(200, b'[1, 2]')],
                         ids=["not-json", "no-choices", "empty-content", "null-message",
                              "a-list"])
def test_malformed_answers(fake_llm: FakeLLM, answer: llm.Answer,
                           caplog: pytest.LogCaptureFixture) -> None:
    fake_llm.default = answer
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm).summarize("entity", "e", EVENTS)
    assert failed.value.code == "malformed_answer"
    assert str(failed.value) == ("the summariser endpoint did not answer as an "
                                 "OpenAI-compatible chat completion")
    assert len(fake_llm.seen) == 1
    assert REMOTE_SECRET not in caplog.text and KEY not in caplog.text


def test_an_oversized_answer_is_malformed(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.ok("x" * (1024 * 1024 + 10))
    with pytest.raises(SummarizerFailed) as failed:
        summarizer(fake_llm).summarize("entity", "e", EVENTS)
    assert failed.value.code == "malformed_answer"


def test_budget_refuses_before_the_call(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.ok("- a", total_tokens=1500)
    budget = TokenBudget(4000)
    s = summarizer(fake_llm, budget=budget)
    s.summarize("entity", "e", EVENTS)  # estimate ~1,250 tokens; 1,500 used
    s.summarize("entity", "e", EVENTS)
    assert (budget.spent, budget.remaining) == (3000, 1000)
    with pytest.raises(BudgetSpent) as spent:
        s.summarize("entity", "e", EVENTS)
    assert spent.value.remaining == 1000
    assert spent.value.needed > 1000
    assert len(fake_llm.seen) == 2  # the third call was never sent


def expected_estimate(max_output_tokens: int = 1024) -> int:
    chat = compression.messages("entity", "e", EVENTS, max_chars=48_000)
    return compression.estimate_tokens(chat) + max_output_tokens


def test_usage_absent_charges_the_estimate(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.ok("- a", total_tokens=None)
    budget = TokenBudget(10_000)
    summary = summarizer(fake_llm, budget=budget).summarize("entity", "e", EVENTS)
    assert summary.tokens_used == budget.spent == expected_estimate()


def test_a_budget_covering_exactly_the_estimate_is_enough(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.ok("- a", total_tokens=7)
    short = TokenBudget(expected_estimate() - 1)
    with pytest.raises(BudgetSpent) as spent:
        summarizer(fake_llm, budget=short).summarize("entity", "e", EVENTS)
    assert (spent.value.needed, spent.value.remaining) == (expected_estimate(),
                                                           expected_estimate() - 1)
    assert fake_llm.seen == []
    exact = TokenBudget(expected_estimate())
    summarizer(fake_llm, budget=exact).summarize("entity", "e", EVENTS)
    assert (exact.spent, len(fake_llm.seen)) == (7, 1)


def test_long_buckets_are_reduced_to_their_essentials(fake_llm: FakeLLM) -> None:
    long = [EventText(uuid.UUID(int=i), "call_summary", datetime(2025, 1, 1, tzinfo=UTC),
                      "Weather chat and pleasantries. " * 40 + f"We agreed on item {i}.")
            for i in range(20)]
    summarizer(fake_llm, max_input_chars=4000).summarize("entity", "e", long)
    user = fake_llm.seen[0].json["messages"][1]["content"]
    assert len(user) <= 4000
    assert user.count("We agreed on item") == 20
    assert "Weather chat" not in user


# -- the endpoint guard ------------------------------------------------------------------

@pytest.mark.parametrize("base_url", [
    "http://169.254.169.254/v1", "http://10.0.0.5:8000/v1", "http://[::1]:8000/v1",
    "http://llm.evil.example/v1", "file:///etc/passwd", "http://user:pw@127.0.0.1/v1"])
def test_endpoints_the_guard_refuses(base_url: str) -> None:
    s = OpenAICompatibleSummarizer(base_url=base_url, model="m", api_key=KEY,
                                   policy=EndpointPolicy.from_entries([]), sleep=Sleeps())
    with pytest.raises(SummarizerFailed) as failed:
        s.summarize("entity", "e", EVENTS)
    assert failed.value.code == "endpoint_not_allowed"


def test_loopback_is_refused_unless_a_cidr_allows_it(fake_llm: FakeLLM) -> None:
    """'localhost' passes as a host pattern but resolves to 127.0.0.1: refused at connect
    time, nothing sent; with 127.0.0.1/32 allowed it connects."""
    url = f"http://localhost:{fake_llm.port}/v1"
    refused = OpenAICompatibleSummarizer(base_url=url, model="m", api_key=KEY,
                                         policy=EndpointPolicy.from_entries(["localhost"]),
                                         sleep=Sleeps())
    with pytest.raises(SummarizerFailed) as failed:
        refused.summarize("entity", "e", EVENTS)
    assert failed.value.code == "endpoint_not_allowed"
    assert fake_llm.seen == []
    allowed = OpenAICompatibleSummarizer(
        base_url=url, model="m", api_key=KEY, sleep=Sleeps(),
        policy=EndpointPolicy.from_entries(["localhost", "127.0.0.1/32"]))
    assert allowed.summarize("entity", "e", EVENTS).text == "- Decided to move budget to Meta."


def test_unreachable_is_retried_then_fails() -> None:
    from tests.support.emulators import closed_port

    sleeps = Sleeps()
    s = OpenAICompatibleSummarizer(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m",
                                   api_key=KEY, policy=LOOPBACK, sleep=sleeps, max_retries=1)
    with pytest.raises(SummarizerFailed) as failed:
        s.summarize("entity", "e", EVENTS)
    assert failed.value.code == "unreachable"
    assert sleeps == [0.5]


def test_the_key_is_in_no_log_line_or_error(fake_llm: FakeLLM,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.answer(llm.rate_limited("1"), llm.server_error(), llm.error(401))
    s = summarizer(fake_llm)
    with pytest.raises(SummarizerFailed) as failed:
        s.summarize("entity", "e", EVENTS)
    assert failed.value.code == "auth_failed"
    assert KEY not in repr(s) and KEY not in str(failed.value)
    assert KEY not in caplog.text and REMOTE_SECRET not in caplog.text
    assert "summariser call to 127.0.0.1 failed: auth_failed" in caplog.text


def test_probe_makes_a_one_token_call(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.ok("", total_tokens=3)  # an empty probe answer is fine
    summarizer(fake_llm).probe()
    [seen] = fake_llm.seen
    assert seen.json["max_tokens"] == 1
    assert seen.json["messages"] == [{"role": "user", "content": "Reply with: ok"}]
