"""A segment's keyword index, built with numpy, holds exactly what counting each text's
words one by one gives: per word the rows holding it, ascending, with its count in each,
and each row's length in words."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from control_plane.search.index import keyword_index, words


def _counted(texts: list[str]) -> tuple[list[float], dict[str, tuple[list[int], list[float]]]]:
    postings: dict[str, tuple[list[int], list[float]]] = {}
    for i, text in enumerate(texts):
        for term, tf in Counter(words(text)).items():
            postings.setdefault(term, ([], []))[0].append(i)
            postings[term][1].append(float(tf))
    return [float(len(words(t))) for t in texts], postings


def _as_lists(index: tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]
              ) -> tuple[list[float], dict[str, tuple[list[int], list[float]]]]:
    lengths, postings = index
    assert lengths.dtype == np.float32
    assert all(d.dtype == np.int64 and f.dtype == np.float32 for d, f in postings.values())
    return lengths.tolist(), {t: (d.tolist(), f.tolist()) for t, (d, f) in postings.items()}


def test_rows_lengths_and_counts() -> None:
    texts = ["The dog and the cat", "", "dog dog DOG", "İstanbul café, naïve café"]

    lengths, postings = _as_lists(keyword_index(texts))

    assert lengths == [5.0, 0.0, 3.0, 4.0]
    assert postings == {"the": ([0], [2.0]), "dog": ([0, 2], [1.0, 3.0]), "and": ([0], [1.0]),
                        "cat": ([0], [1.0]), "i̇stanbul": ([3], [1.0]),
                        "café": ([3], [2.0]), "naïve": ([3], [1.0])}


def test_no_words_at_all() -> None:
    assert _as_lists(keyword_index([])) == ([], {})
    assert _as_lists(keyword_index(["", " ,; "])) == ([0.0, 0.0], {})


@given(st.lists(st.text(alphabet=st.sampled_from("ab cd_é,İ9 \n"), max_size=30), max_size=25))
def test_the_same_as_counting_one_text_at_a_time(texts: list[str]) -> None:
    assert _as_lists(keyword_index(texts)) == _counted(texts)
