"""``/readyz`` answers within its own bound when the database pool has no connection left.

Requests that hold every connection of the pool would make the probe wait the pool's own
30 s for one (SQLAlchemy's ``pool_timeout``), longer than any orchestrator waits for it;
the probe gives up after ``health.PROBE_SECONDS`` and says the server is not ready. The
test's client waits 15 s, half the pool's wait: without the probe's bound it times out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from control_plane.db.engine import peak_extra
from control_plane.health import PROBE_SECONDS
from tests.support.service import ServerThread, Stack, make_settings

POOL_SIZE = 1
NOT_READY = {"status": "unavailable",
             "detail": "the database did not answer within 2 seconds (not reachable, or every "
                       "connection of the pool is in use)"}


@pytest.fixture
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    settings = make_settings("sqlite", tmp_path_factory.mktemp("ready"),
                             db_pool_size=POOL_SIZE, run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


def test_readyz_answers_503_at_once_while_every_pooled_connection_is_held(
        stack: Stack) -> None:
    assert PROBE_SECONDS == 2
    engine = stack.runtime.engine
    with httpx.Client(base_url=stack.base_url, timeout=15) as http:
        before = http.get("/readyz")
        held = [engine.connect() for _ in range(POOL_SIZE + peak_extra(POOL_SIZE))]
        try:
            assert engine.pool.checkedout() == len(held) == 2  # none left to hand out
            during = [http.get("/readyz") for _ in range(3)]  # more than the probe threads
            alive = http.get("/healthz")
        finally:
            for connection in held:
                connection.close()
        # a probe left waiting gets its connection now and lets it go
        after = http.get("/readyz")

    assert (before.status_code, before.json()) == (200, {"status": "ready"})
    assert [(r.status_code, r.json()) for r in during] == [(503, NOT_READY)] * 3
    assert (alive.status_code, alive.json()) == (200, {"status": "ok"})
    assert (after.status_code, after.json()) == (200, {"status": "ready"})
    assert threading.active_count() < 200  # no thread per probe piling up
