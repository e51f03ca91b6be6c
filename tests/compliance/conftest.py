"""Service-level compliance tests run jobs with workers of their own, so they get a database
of their own: a server's in-process worker on the shared test database must not take over
their jobs (it would work on another bucket)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.runtime import Runtime
from tests.support.service import isolated_database, make_settings


@pytest.fixture(scope="session")
def service_runtime(database: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    url = isolated_database(database, request)
    runtime = Runtime(make_settings(url, tmp_path_factory.mktemp("compliance-services")))
    if url == "sqlite":
        runtime.migrate()
    try:
        yield runtime
    finally:
        runtime.close()
