"""Reciprocal rank fusion as search computes it: each candidate's score from its own ranks
in the rankings, how many of the best candidates the live filter checks first, and the top
of a ranking."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from control_plane.search.service import RRF_K, _top, first_check, fuse


def test_a_score_is_the_sum_of_one_over_sixty_plus_each_rank() -> None:
    fused = fuse([7, 3, 9], [9, 4])

    assert RRF_K == 60
    assert list(fused) == [7, 3, 9, 4]  # first seen first: ties keep the rankings' order
    assert fused == {7: 1 / 61, 3: 1 / 62, 9: 1 / 63 + 1 / 61, 4: 1 / 62}


def test_a_candidate_in_no_ranking_has_no_score_and_an_empty_fusion_is_empty() -> None:
    assert fuse([], []) == {}
    assert 5 not in fuse([1, 2], [2, 3])


def test_the_first_check_covers_the_limit_with_a_margin() -> None:
    assert [first_check(n) for n in (1, 5, 8, 10, 11, 100)] == [5, 9, 12, 15, 16, 150]


@given(st.lists(st.sampled_from([-np.inf, 0.0, 0.25, 0.5, 1.0, 2.0]) | st.floats(-5, 5),
                min_size=1, max_size=60), st.integers(1, 70))
def test_the_top_is_the_n_highest_scores_best_first(values: list[float], n: int) -> None:
    scores = np.asarray(values, dtype=np.float32)

    top = _top(scores, n)

    assert len(set(top.tolist())) == len(top) == min(n, len(scores))
    assert scores[top].tolist() == sorted(scores.tolist(), reverse=True)[:len(top)]
