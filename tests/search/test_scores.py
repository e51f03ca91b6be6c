"""A segment's vector scores: the product over only the query's nonzero dimensions gives the
whole product's scores and ranking, for the hashing embedder's real queries and for any
sparse query."""

from __future__ import annotations

import uuid

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from control_plane.embedders.hashing import HashingEmbedder
from control_plane.search.codec import Rows
from control_plane.search.index import Segment, sparse_dimensions

MEMORIES = [
    "The user prefers answers in French and short sentences.",
    "Their dog is called Biscuit and is afraid of thunderstorms.",
    "Works as a nurse on night shifts at the city hospital.",
    "Allergic to peanuts; loves spicy Thai curry.",
    "Deploys the billing service every Tuesday after the standup.",
    "Keeps a sourdough starter named Clint on the kitchen shelf.",
]


def _segment(vectors: np.ndarray) -> Segment:
    n = len(vectors)
    return Segment.of(uuid.uuid4(), Rows("m", [uuid.uuid4() for _ in range(n)], [1] * n,
                                         [f"t{i}" for i in range(n)], vectors))


def test_a_hashing_query_reads_few_columns_and_ranks_as_the_whole_product() -> None:
    embedder = HashingEmbedder()
    vectors = embedder.embed(MEMORIES)
    segment = _segment(vectors)
    query = embedder.embed(["dog afraid of thunderstorms"])[0]

    nonzero = sparse_dimensions(query)

    assert nonzero is not None
    assert nonzero.tolist() == np.flatnonzero(query).tolist()
    assert len(nonzero) * 4 <= HashingEmbedder.dim
    sparse = segment.scores(query, nonzero)
    dense = vectors @ query
    np.testing.assert_allclose(sparse, dense, rtol=0, atol=1e-6)
    # The same order wherever the whole product tells two memories apart. Memories sharing
    # no feature with the query score 0 there and a rounding error (±1e-9) here, so those
    # ties may fall either way, depending on the BLAS kernel the machine picks.
    apart = [(i, j) for i in range(len(dense)) for j in range(len(dense))
             if dense[i] - dense[j] > 1e-6]
    assert len(apart) == 14
    assert [(i, j) for i, j in apart if not sparse[i] > sparse[j]] == []
    assert int(np.argmax(sparse)) == 1  # the dog


def test_a_dense_query_takes_the_whole_product() -> None:
    query = np.linspace(0.1, 1.0, 64, dtype=np.float32)
    vectors = np.arange(5 * 64, dtype=np.float32).reshape(5, 64) / 100

    assert sparse_dimensions(query) is None
    np.testing.assert_allclose(_segment(vectors).scores(query, None), vectors @ query,
                               rtol=1e-6, atol=0)


@given(st.integers(1, 40), st.integers(8, 96), st.data())
def test_the_sparse_product_equals_the_whole_one(rows: int, dim: int, data: st.DataObject
                                                 ) -> None:
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((rows, dim)).astype(np.float32)
    query = np.zeros(dim, dtype=np.float32)
    chosen = rng.choice(dim, size=data.draw(st.integers(1, dim // 4)), replace=False)
    query[chosen] = rng.standard_normal(len(chosen)).astype(np.float32)

    nonzero = sparse_dimensions(query)

    assert nonzero is not None
    assert sorted(nonzero.tolist()) == sorted(chosen.tolist())
    np.testing.assert_allclose(_segment(vectors).scores(query, nonzero), vectors @ query,
                               rtol=1e-5, atol=1e-5)


@given(st.sampled_from([1, 9, 40, 128]), st.integers(0, 2**32 - 1))
def test_a_segment_larger_than_a_gathered_block_scores_as_the_whole_product(
        columns: int, seed: int) -> None:
    """Past ``_GATHERED`` floats the columns are gathered block by block (1,024 rows at a time
    for 128 columns, here three blocks and a part): every row is scored, as the whole
    product scores it."""
    rng = np.random.default_rng(seed)
    rows = 3 * 1024 + 77
    vectors = rng.standard_normal((rows, 512)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = np.zeros(512, dtype=np.float32)
    chosen = rng.choice(512, size=columns, replace=False)
    query[chosen] = rng.standard_normal(columns).astype(np.float32)

    scores = _segment(vectors).scores(query, sparse_dimensions(query))

    assert scores.shape == (rows,) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, vectors.astype(np.float64) @ query, rtol=0, atol=2e-6)
    assert int(np.argmax(scores)) == int(np.argmax(vectors @ query))
