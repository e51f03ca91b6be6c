"""The OpenAI-compatible embedder against a small real HTTP server (tests/support/
fake_llm.py): the request it sends, batches, retries with backoff and Retry-After, timeouts,
malformed answers, and the endpoint guard. Nothing the remote says reaches an error or a
log line."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from control_plane.embedders import Embedder, EmbedderFailed
from control_plane.embedders.openai_compat import OpenAICompatibleEmbedder
from storage_adapters.netguard import EndpointPolicy
from tests.support import fake_llm as llm
from tests.support.emulators import closed_port
from tests.support.fake_llm import REMOTE_SECRET, FakeLLM

KEY = "sk-embed-" + "k" * 40
LOOPBACK = EndpointPolicy.from_entries(["127.0.0.1/32"])


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def embedder(server: FakeLLM, sleeps: Sleeps | None = None, **options: Any
             ) -> OpenAICompatibleEmbedder:
    values: dict[str, Any] = dict(base_url=server.base_url, model="fake-embed", api_key=KEY,
                                  policy=LOOPBACK, timeout_seconds=5, max_retries=2,
                                  sleep=sleeps if sleeps is not None else Sleeps())
    values.update(options)
    return OpenAICompatibleEmbedder(**values)


def test_embeds_in_batches_and_skips_empty_texts(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.embeddings(dim=6)
    e = embedder(fake_llm, max_batch=2)
    assert isinstance(e, Embedder)
    texts = ["alpha", "", "beta", "gamma", "   ", "delta", "epsilon"]
    vectors = e.embed(texts)
    assert vectors.shape == (7, 6) and vectors.dtype == np.float32
    assert (e.name, e.dim) == ("openai:fake-embed", 6)
    assert [s.json["input"] for s in fake_llm.seen] == [
        ["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert all(s.path == "/v1/embeddings" and s.json["model"] == "fake-embed"
               and s.headers["Authorization"] == f"Bearer {KEY}" for s in fake_llm.seen)
    for row, text in enumerate(texts):
        if text.strip():
            np.testing.assert_allclose(vectors[row], llm.vector_for(text, 6), atol=1e-6)
        else:
            assert not vectors[row].any()


def test_vectors_are_normalised_and_reordered_by_index(fake_llm: FakeLLM) -> None:
    body = {"object": "list", "data": [{"index": 1, "embedding": [0, 2]},
                                       {"index": 0, "embedding": [3, 4]}]}
    fake_llm.answer(llm.Answer(200, llm.json.dumps(body).encode()))
    vectors = embedder(fake_llm).embed(["first", "second"])
    np.testing.assert_allclose(vectors, [[0.6, 0.8], [0.0, 1.0]], atol=1e-6)


def test_no_key_sends_no_authorization(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.embeddings()
    embedder(fake_llm, api_key=None).embed(["x"])
    assert "Authorization" not in fake_llm.seen[0].headers


def test_429_waits_what_retry_after_says_capped(fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.rate_limited("7"), llm.rate_limited("120"), llm.embeddings())
    sleeps = Sleeps()
    assert embedder(fake_llm, sleeps, max_retry_wait=30).embed(["x"]).shape == (1, 8)
    assert sleeps == [7.0, 30.0]


def test_429_exhausted_is_rate_limited(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.rate_limited(None)
    sleeps = Sleeps()
    with pytest.raises(EmbedderFailed) as failed:
        embedder(fake_llm, sleeps, max_retries=2).embed(["x"])
    assert failed.value.code == "rate_limited"
    assert str(failed.value) == "the embeddings endpoint kept answering 429 (rate limited)"
    assert sleeps == [0.5, 1.0]
    assert len(fake_llm.seen) == 3


def test_500_is_retried_then_succeeds(fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.server_error(), llm.embeddings(4))
    sleeps = Sleeps()
    assert embedder(fake_llm, sleeps).embed(["x"]).shape == (1, 4)
    assert sleeps == [0.5]


def test_500_exhausted_fails(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.server_error()
    with pytest.raises(EmbedderFailed) as failed:
        embedder(fake_llm, max_retries=1).embed(["x"])
    assert failed.value.code == "server_error"
    assert len(fake_llm.seen) == 2


def test_timeout_is_retried_then_fails(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.stall()
    sleeps = Sleeps()
    with pytest.raises(EmbedderFailed) as failed:
        embedder(fake_llm, sleeps, timeout_seconds=0.2, max_retries=1).embed(["x"])
    assert failed.value.code == "timeout"
    assert sleeps == [0.5]
    assert len(fake_llm.seen) == 2


@pytest.mark.parametrize(("status", "code"), [(401, "auth_failed"), (403, "auth_failed"),
                                              (404, "endpoint_refused"),
                                              (400, "endpoint_refused")])
def test_refusals_fail_at_once(fake_llm: FakeLLM, status: int, code: str) -> None:
    fake_llm.default = llm.error(status)
    with pytest.raises(EmbedderFailed) as failed:
        embedder(fake_llm).embed(["x"])
    assert failed.value.code == code
    assert len(fake_llm.seen) == 1


@pytest.mark.parametrize("answer", [
    llm.not_json(), llm.no_choices(), llm.ok("a chat answer, not embeddings"),
    llm.embedding_list([[0.1, 0.2]]),  # one vector for two texts
    llm.embedding_list([[0.1, 0.2], [0.3]]),  # lengths differ
    llm.embedding_list([[0.1, "x"], [0.3, 0.4]]),  # not numbers
    llm.embedding_list([[0.0, 0.0], [0.3, 0.4]]),  # a zero vector
    llm.embedding_list([[], []]),
], ids=["not-json", "no-data", "chat", "too-few", "ragged", "not-numbers", "zero", "empty"])
def test_malformed_answers(fake_llm: FakeLLM, answer: llm.Answer,
                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.answer(answer)
    with pytest.raises(EmbedderFailed) as failed:
        embedder(fake_llm).embed(["one", "two"])
    assert failed.value.code == "malformed_answer"
    assert REMOTE_SECRET not in str(failed.value) and REMOTE_SECRET not in caplog.text
    assert len(fake_llm.seen) == 1  # not retried


def test_a_dimension_change_is_malformed(fake_llm: FakeLLM) -> None:
    fake_llm.answer(llm.embeddings(8))
    e = embedder(fake_llm, dim=4)
    with pytest.raises(EmbedderFailed) as failed:
        e.embed(["x"])
    assert failed.value.code == "malformed_answer"


@pytest.mark.parametrize("base_url", ["http://169.254.169.254/v1", "http://10.0.0.5:8080/v1",
                                      "http://[::1]:8080/v1",
                                      "http://metadata.google.internal/v1"])
def test_endpoints_the_guard_refuses(base_url: str) -> None:
    e = OpenAICompatibleEmbedder(base_url=base_url, model="m", api_key=KEY,
                                 policy=EndpointPolicy.from_entries([]), sleep=Sleeps())
    with pytest.raises(EmbedderFailed) as failed:
        e.embed(["x"])
    assert failed.value.code == "endpoint_not_allowed"


def test_loopback_is_refused_unless_allowed(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.embeddings()
    with pytest.raises(EmbedderFailed) as failed:
        embedder(fake_llm, policy=EndpointPolicy.from_entries([])).embed(["x"])
    assert failed.value.code == "endpoint_not_allowed"
    assert fake_llm.seen == []


def test_unreachable_is_retried_then_fails() -> None:
    sleeps = Sleeps()
    e = OpenAICompatibleEmbedder(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m",
                                 api_key=None, policy=LOOPBACK, max_retries=1, sleep=sleeps)
    with pytest.raises(EmbedderFailed) as failed:
        e.embed(["x"])
    assert failed.value.code == "unreachable"
    assert sleeps == [0.5]


def test_the_key_is_in_no_log_line_or_error(fake_llm: FakeLLM,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm.default = llm.error(401)
    e = embedder(fake_llm)
    with pytest.raises(EmbedderFailed) as failed:
        e.embed(["x"])
    assert KEY not in caplog.text and KEY not in str(failed.value) and KEY not in repr(e)
    assert REMOTE_SECRET not in caplog.text


def test_probe_fixes_the_dimension(fake_llm: FakeLLM) -> None:
    fake_llm.default = llm.embeddings(12)
    e = embedder(fake_llm)
    assert (e.probe(), e.dim) == (12, 12)
    assert fake_llm.seen[0].json["input"] == ["memplane probe"]
