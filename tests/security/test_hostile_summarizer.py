"""A tenant's summariser endpoint is a hostile party: its answer is bounded in bytes and in
what parsing it builds. An answer of tiny values or deep nesting is ``malformed_answer`` —
refused before it becomes millions of Python objects or a RecursionError — so the save-time
probe answers 422 (never 500) and a compactor run skips the bucket."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from control_plane.summarizers import SummarizerFailed, TokenBudget
from control_plane.summarizers.openai_compat import MAX_ANSWER_BYTES, OpenAICompatibleSummarizer
from storage_adapters.netguard import EndpointPolicy
from tests.security.http_servers import Recorder
from tests.summarizers.test_openai_compat import EVENTS
from tests.support.service import Tenant

JSON = {"Content-Type": "application/json"}
SENTENCE = "the summariser endpoint did not answer as an OpenAI-compatible chat completion"


def _just_under_cap(head: bytes, unit: bytes, tail: bytes) -> bytes:
    count = (MAX_ANSWER_BYTES - len(head) - len(tail)) // len(unit)
    answer = head + unit * count + tail
    assert MAX_ANSWER_BYTES - len(unit) < len(answer) <= MAX_ANSWER_BYTES
    return answer


HOSTILE = {
    # 1 MiB of brackets: the parser recursed until a RecursionError.
    "deep nesting": b"[" * (MAX_ANSWER_BYTES - 1),
    # Nesting within the brackets a long summary may hold, still deeper than the parser's
    # recursion can go.
    "deep nesting within the bracket bound": b'{"choices":' + b"[" * 5000,
    # ~350 k empty lists: ~64 bytes of Python each for 3 bytes of answer.
    "empty lists": _just_under_cap(b'{"choices":[', b"[],", b'{"message":{"content":"x"}}]}'),
    # ~520 k numbers in the usage object.
    "tiny numbers": _just_under_cap(b'{"usage":{"n":[', b"0,",
                                    b'0]},"choices":[{"message":{"content":"x"}}]}'),
}


def _summarizer(url: str) -> OpenAICompatibleSummarizer:
    return OpenAICompatibleSummarizer(base_url=url, model="m", api_key=None,
                                      policy=EndpointPolicy.from_entries(["127.0.0.1/32"]),
                                      budget=TokenBudget(), timeout_seconds=30,
                                      max_retries=0, max_output_tokens=1024,
                                      sleep=lambda _: None)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_blow_up_answer_is_a_malformed_answer(name: str) -> None:
    answer = HOSTILE[name]
    with Recorder(body=answer, headers=JSON) as hostile:
        summarizer = _summarizer(hostile.url)
        tracemalloc.start()
        try:
            with pytest.raises(SummarizerFailed) as failed:
                summarizer.summarize("entity", "acme", EVENTS)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (failed.value.code, str(failed.value)) == ("malformed_answer", SENTENCE)
    # The answer is held while it is read and joined; parsing the blow-ups would have cost
    # 8-20 times as much.
    assert peak < 4 * len(answer) + 2 * 1024 * 1024, (peak, len(answer))


def test_an_honest_long_summary_full_of_punctuation_passes() -> None:
    """No false alarm: 1,024 tokens' worth of text thick with commas, colons and brackets,
    pretty-printed, with the extra fields providers add."""
    text = "- Budget: [Q2], $40k, Meta, Acme; owner: Priya, Jordan.\n" * 80
    honest: dict[str, Any] = {
        "id": "c1", "object": "chat.completion", "model": "m", "system_fingerprint": None,
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": text, "tool_calls": [],
                                 "refusal": None}}],
        "usage": {"prompt_tokens": 400, "completion_tokens": 1000, "total_tokens": 1400,
                  "prompt_tokens_details": {"cached_tokens": 0}}}
    with Recorder(body=json.dumps(honest, indent=4).encode(), headers=JSON) as server:
        summary = _summarizer(server.url).summarize("entity", "acme", EVENTS)
    assert (summary.text, summary.tokens_used) == (text.strip(), 1400)


@pytest.mark.parametrize("name", ["deep nesting", "empty lists"])
def test_the_save_time_probe_answers_422_for_a_blow_up(tenant: Tenant, name: str) -> None:
    with Recorder(body=HOSTILE[name], headers=JSON) as hostile, \
            tenant.stack.http(tenant.admin_key) as http:
        refused = http.put("/v1/summarizer/config",
                           json={"base_url": hostile.url, "model": "m", "max_retries": 0})
        shown = http.get("/v1/summarizer/config").json()
    assert refused.status_code == 422
    assert refused.json() == {
        "error": "validation_error", "problem": "malformed_answer",
        "detail": f"{SENTENCE} (malformed_answer); nothing was saved — fix the base_url, "
                  f"model or api_key and retry"}
    assert shown["provider"] == "extractive"
    with tenant.client() as client:
        rows = list(client.audit.list(operation="summarizer_config_write").items)
    assert [(r.success, r.detail) for r in rows] == [
        (False, f"provider=openai_compatible host=127.0.0.1 model=m validation_error: "
                f"{SENTENCE} (malformed_answer); nothing was saved — fix the base_url, "
                f"model or api_key and retry")]
