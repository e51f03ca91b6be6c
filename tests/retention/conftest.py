from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.retention.helpers import own_world
from tests.support.service import ServiceWorld


@pytest.fixture
def lone_world(database: str, request: pytest.FixtureRequest,
               tmp_path: Path) -> Iterator[ServiceWorld]:
    """``world`` on a database no other test uses, for tests that run a job worker."""
    with own_world(database, request, tmp_path) as world:
        yield world
