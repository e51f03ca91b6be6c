"""MEMPLANE_BLAS_THREADS: a runtime limits numpy's BLAS to that many threads per matrix
product (a search's ranking), 0 leaves the library's own choice, and the products are the
same either way."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from control_plane.runtime import Runtime
from control_plane.search import blas
from control_plane.settings import Settings


@pytest.fixture
def threads() -> Iterator[int]:
    """numpy's BLAS thread count before the test; put back after it."""
    before = blas.current_threads()
    if before is None:
        pytest.skip("numpy's BLAS here is not an OpenBLAS this process can see")
    try:
        yield before
    finally:
        blas.limit_threads(before)


def test_a_runtime_limits_blas_to_the_setting(
        threads: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    blas.limit_threads(2)
    runtime = Runtime(Settings(data_dir=tmp_path_factory.mktemp("blas"), run_background=False))
    try:
        limited = blas.current_threads()
    finally:
        runtime.close()
    kept = blas.limit_threads(0)

    assert Settings().blas_threads == 1
    assert limited == 1
    assert (kept, blas.current_threads()) == (False, 1)  # 0: left as it was


def test_products_are_the_same_with_one_thread_or_two(threads: int) -> None:
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((20_000, 64)).astype(np.float32)
    query = rng.standard_normal(64).astype(np.float32)
    blas.limit_threads(2)
    two = matrix @ query
    blas.limit_threads(1)
    one = matrix @ query

    assert blas.current_threads() == 1
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-5)
