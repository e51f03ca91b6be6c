"""A tenant's embeddings endpoint is a hostile party: its answer is bounded by the vectors
asked for, in bytes and in what parsing it builds — an answer of tiny values or deep
nesting just under the byte cap is refused before it becomes millions of Python objects."""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest

from control_plane.embedders import EmbedderFailed
from control_plane.embedders.openai_compat import MAX_DIM, OpenAICompatibleEmbedder, answer_cap
from storage_adapters.netguard import EndpointPolicy
from tests.security.http_servers import Recorder

TEXTS = [f"text {i}" for i in range(8)]
CAP = answer_cap(len(TEXTS), MAX_DIM)  # the dimension is not known yet: the largest allowed


def _embedder(url: str, dim: int | None = None) -> OpenAICompatibleEmbedder:
    return OpenAICompatibleEmbedder(base_url=url, model="m", api_key=None, dim=dim,
                                    policy=EndpointPolicy.from_entries(["127.0.0.1/32"]),
                                    timeout_seconds=30, max_retries=0,
                                    sleep=lambda _: None)


def _just_under_cap(head: bytes, unit: bytes, tail: bytes) -> bytes:
    count = (CAP - len(head) - len(tail)) // len(unit)
    answer = head + unit * count + tail
    assert CAP - len(unit) < len(answer) <= CAP
    return answer


HOSTILE = {
    # ~1.1 M empty objects: ~70 bytes of Python each for 3 bytes of answer.
    "empty objects": _just_under_cap(b'{"data":[{"index":0,"embedding":[', b"{},", b"{}]}]}"),
    # ~0.8 M floats: 32 bytes of Python each for 4 of answer.
    "tiny numbers": _just_under_cap(b'{"data":[{"index":0,"embedding":[', b"0.0,", b"0]}]}"),
    # Nesting deep enough to exhaust the parser's recursion (a RecursionError, not a 4xx).
    "deep nesting": b'{"data":' + b"[" * 200_000,
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_blow_up_answer_is_refused_before_it_is_parsed(name: str) -> None:
    answer = HOSTILE[name]
    with Recorder(body=answer, headers={"Content-Type": "application/json"}) as hostile:
        embedder = _embedder(hostile.url)
        tracemalloc.start()
        try:
            with pytest.raises(EmbedderFailed) as failed:
                embedder.embed(TEXTS)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert failed.value.code == "malformed_answer"
    assert str(failed.value) == ("the embeddings endpoint did not answer as an "
                                 "OpenAI-compatible embeddings list")
    # The answer is held while it is read and joined; parsing it would have cost 8-20 times
    # as much (and the deep one a RecursionError).
    assert peak < 4 * len(answer) + 2 * 1024 * 1024, (peak, len(answer))


def test_an_answer_over_the_cap_for_its_known_dimension_is_refused() -> None:
    """Once the dimension is known (4), the cap is that of 8 vectors of 4 numbers."""
    honest = {"data": [{"index": i, "embedding": [0.5, 0.5, 0.5, 0.5]}
                       for i in range(len(TEXTS))]}
    padded = json.dumps(honest).encode() + b" " * answer_cap(len(TEXTS), 4)
    with Recorder(body=padded, headers={"Content-Type": "application/json"}) as hostile:
        with pytest.raises(EmbedderFailed) as failed:
            _embedder(hostile.url, dim=4).embed(TEXTS)
    assert failed.value.code == "malformed_answer"


def test_an_honest_answer_of_the_largest_vectors_pretty_printed_passes() -> None:
    """No false alarm: 8 vectors of MAX_DIM long floats, indented, with usage."""
    rng = random.Random(7)
    honest = {"object": "list", "model": "m", "usage": {"prompt_tokens": 8, "total_tokens": 8},
              "data": [{"object": "embedding", "index": i,
                        "embedding": [rng.uniform(-1, 1) / 7 for _ in range(MAX_DIM)]}
                       for i in range(len(TEXTS))]}
    body = json.dumps(honest, indent=6).encode()
    assert len(body) < CAP
    with Recorder(body=body, headers={"Content-Type": "application/json"}) as server:
        vectors = _embedder(server.url).embed(TEXTS)
    assert vectors.shape == (len(TEXTS), MAX_DIM)
