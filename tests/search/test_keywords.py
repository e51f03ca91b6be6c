"""BM25 over a set of segments with what is kept of them between searches (``Keywords``,
cached with the set's deduplication) scores exactly as computed afresh — also where a
pointer appears in two segments and only its newest row counts."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from control_plane.search import index
from control_plane.search.codec import Rows
from control_plane.search.index import Keywords, SearchCache, Segment, bm25

TEXTS = ["the dog is called biscuit and fears thunder",
         "works night shifts as a nurse at the hospital",
         "allergic to peanuts and loves thai curry",
         "the dog barks at thunder and at the mail carrier",
         "a nurse and a dog walk to the hospital at night"]


def _segment(ids: list[uuid.UUID], versions: list[int], texts: list[str]) -> Segment:
    vectors = np.zeros((len(ids), 4), dtype=np.float32)
    return Segment.of(uuid.uuid4(), Rows("m", ids, versions, texts, vectors))


def test_kept_keywords_score_as_computed_afresh() -> None:
    ids = [uuid.uuid4() for _ in TEXTS]
    snapshot = _segment(ids, [1] * len(ids), TEXTS)
    # A later delta: the second pointer overwritten (its old row no longer counts), a new one.
    delta = _segment([ids[1], uuid.uuid4()], [2, 1],
                     ["dog and thunder at the hospital", "thunder thunder dog"])
    segments = [snapshot, delta]
    masks, keywords = SearchCache(1000, 1000).view(segments)
    queries = ["dog thunder", "nurse hospital night", "thunder", "peanuts", "unseen words",
               "dog thunder"]  # the last one again: from what the first one kept

    kept = [bm25(segments, masks, q, keywords) for q in queries]
    fresh = [bm25(segments, masks, q) for q in queries]

    assert [m.tolist() for m in masks] == [[True, False, True, True, True], [True, True]]
    assert all(np.array_equal(k, f) for one, other in zip(kept, fresh, strict=True)
               for k, f in zip(one, other, strict=True))
    assert kept[0][0][1] == 0.0 and kept[0][1][0] > 0  # the overwritten row scores nothing
    assert [float(s.sum()) for s in kept[4]] == [0.0, 0.0]
    assert isinstance(keywords, Keywords) and keywords.total == 6


def test_kept_weights_are_bounded_by_the_rows_and_every_score_stays_exact(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [uuid.uuid4() for _ in TEXTS]
    segments = [_segment(ids, [1] * len(ids), TEXTS)]
    masks, keywords = SearchCache(1000, 1000).view(segments)
    # Room for 5 weights (one per row): 'dog' (3 rows) and 'nurse' (2 rows), then no more.
    monkeypatch.setattr(index, "_WEIGHTS_PER_ROW", 1)
    queries = ["dog", "nurse", "thunder hospital", "dog thunder", "peanuts"]
    kept = [bm25(segments, masks, q, keywords) for q in queries]
    fresh = [bm25(segments, masks, q) for q in queries]
    assert all(np.array_equal(k[0], f[0]) for k, f in zip(kept, fresh, strict=True))
    assert sorted(keywords._weights) == ["dog", "nurse"]  # the others found no room
    assert keywords._kept == 5 == keywords.total
    weights = keywords._weights["dog"][0]
    assert weights is not None and not weights[1].flags.writeable
    assert [i for i, x in enumerate(kept[0][0]) if x > 0] == [0, 3, 4]


def test_a_terms_weights_are_bm25_of_the_set() -> None:
    ids = [uuid.uuid4() for _ in TEXTS]
    segment = _segment(ids, [1] * len(ids), TEXTS)
    masks, keywords = SearchCache(1000, 1000).view([segment])
    docs, tfs = segment.postings["thunder"]
    lengths = segment.lengths.astype(np.float64)
    avg = lengths.sum() / len(TEXTS)
    idf = np.log(1.0 + (len(TEXTS) - len(docs) + 0.5) / (len(docs) + 0.5))
    expected = np.zeros(len(TEXTS))
    for doc, tf in zip(docs.tolist(), tfs.tolist(), strict=True):
        expected[doc] = idf * tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * lengths[doc] / avg))
    for _ in range(2):  # computed, then kept
        scores = bm25([segment], masks, "thunder", keywords)[0]
        assert docs.tolist() == [0, 3]
        assert np.allclose(scores, expected, rtol=1e-6, atol=0)
