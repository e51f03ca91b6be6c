from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.runtime import Runtime
from tests.support.service import ServiceWorld


@pytest.fixture
def other(world: ServiceWorld) -> Iterator[Runtime]:
    """A second runtime on the same database and bucket: another server process."""
    runtime = Runtime(world.runtime.settings)
    try:
        yield runtime
    finally:
        runtime.close()
