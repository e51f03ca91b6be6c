"""BM25 over a set of segments with what is kept of them between searches (``Keywords``,
cached with the set's deduplication) scores exactly as computed afresh — also where a
pointer appears in two segments and only its newest row counts."""

from __future__ import annotations

import uuid

import numpy as np

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
