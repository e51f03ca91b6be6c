"""The built-in hashing embedder: summing a text's features per distinct feature gives, bit
for bit, the vector that adding them one by one gives (the weights are multiples of 0.5, so
every sum is exact) — stored vectors and new ones stay comparable."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.embedders.hashing import HashingEmbedder, _features


def one_by_one(text: str, dim: int = 512) -> np.ndarray:
    """The embedder's definition: each feature added to its signed bucket in turn."""
    row = np.zeros(dim, dtype=np.float32)
    for feature, weight in _features(text):
        value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(),
                               "little")
        row[value % dim] += weight if value >> 63 else -weight
    norm = float(np.linalg.norm(row))
    return row / norm if norm else row


TEXTS = [
    "x" * 1000,  # one long word: a thousand equal trigrams
    "",
    "the a an of",  # stop words only: the zero vector
    "Deploys deploying deployed deploy; planned planning plans",
    "café ångström 日本語 naïve naïve naïve",
    " ".join(f"word{i % 37} run running ran" for i in range(400)),
]


def test_the_embedding_is_bit_for_bit_the_feature_by_feature_sum() -> None:
    got = HashingEmbedder().embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 512)
    for row, text in zip(got, TEXTS, strict=True):
        assert np.array_equal(row, one_by_one(text)), text[:40]
    assert not got[1].any() and not got[2].any()
    # Embedding again (the bucket cache now warm) gives the same bits.
    assert np.array_equal(HashingEmbedder().embed(TEXTS), got)


WORDS = st.one_of(
    st.sampled_from(["deploy", "Deploys", "running", "the", "café", "x" * 33, "日本語", "a1_b"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(WORDS, max_size=30).map(" ".join), min_size=1, max_size=4))
def test_any_texts_embed_bit_for_bit_as_their_features_one_by_one(texts: list[str]) -> None:
    # Words repeat within and across texts; short words come from the cache the second time.
    for got in (HashingEmbedder().embed(texts), HashingEmbedder().embed(texts)):
        for row, text in zip(got, texts, strict=True):
            assert np.array_equal(row, one_by_one(text)), text[:40]
