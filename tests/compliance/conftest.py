"""Service-level compliance tests run jobs with workers of their own, so they get a database
of their own, apart from the other service tests too: a worker here takes only the jobs
these tests queued (another's would work on another bucket)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.runtime import Runtime
from tests.support.service import own_runtime


@pytest.fixture(scope="session")
def service_runtime(database: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    yield from own_runtime(database, request, tmp_path_factory, "compliance-services")
