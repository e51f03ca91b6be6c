from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.buckets import RawBucket, open_bucket


@pytest.fixture
def raw_bucket(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RawBucket]:
    """A fresh bucket on the backend named by the (indirect) parameter."""
    bucket = open_bucket(request, request.param, tmp_path)
    yield bucket
    bucket.close()
