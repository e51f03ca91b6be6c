from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.service import (
    ServerThread,
    Stack,
    Tenant,
    isolated_database,
    make_settings,
)


@pytest.fixture(scope="module")
def quiet_stack(database: str, request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server without a background sealer, on a database of its own: rows are sealed only
    when a route seals them (GET /v1/audit, GET /v1/audit/checkpoint), so the tree's size
    between two calls is known."""
    url = isolated_database(database, request)
    settings = make_settings(url, tmp_path_factory.mktemp("tree"), run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


@pytest.fixture
def quiet_tenant(quiet_stack: Stack) -> Tenant:
    return quiet_stack.new_tenant()
