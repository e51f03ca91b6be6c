"""An idle client connection stays open for MEMPLANE_KEEP_ALIVE_SECONDS (75 by default), longer
than the clients' own expiry (httpx, the SDK's: 5 s) and a load balancer's idle timeout: the
client or the balancer closes an idle connection first, so a request is never sent on a
connection the server is closing (it would fail with no answer). uvicorn's own default, 5 s,
raced httpx's 5 s: a soak saw a write fail that way."""

from __future__ import annotations

import http.client
import time
from pathlib import Path

import pytest

from tests.support.process import ServerProcess

pytestmark = pytest.mark.slow

def _answers_after_idle(server: ServerProcess, idle_s: float) -> bool:
    """One request, ``idle_s`` of silence, then a second request on the same connection:
    whether the second is answered (http.client never reconnects on its own)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        first = conn.getresponse()
        assert (first.status, first.getheader("Connection")) == (200, None)
        first.read()
        opened = conn.sock
        time.sleep(idle_s)
        try:
            conn.request("GET", "/healthz")
            second = conn.getresponse()
            second.read()
        except (http.client.RemoteDisconnected, ConnectionError):
            return False
        assert conn.sock is opened  # the same connection, not a new one
        return second.status == 200
    finally:
        conn.close()


@pytest.mark.parametrize(("setting", "idle_s", "answered"), [
    (None, 7.0, True),  # the default keeps it past the 5 s of uvicorn's and httpx's default
    ("1", 3.0, False),  # the setting is what the server uses
])
def test_an_idle_connection_stays_open_as_long_as_the_setting_says(
        tmp_path: Path, setting: str | None, idle_s: float, answered: bool) -> None:
    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "data"), "MEMPLANE_RUN_JOBS": "false",
           "MEMPLANE_EMBED_ON_WRITE": "false"}
    if setting is not None:
        env["MEMPLANE_KEEP_ALIVE_SECONDS"] = setting
    server = ServerProcess(env).start(timeout=120)
    try:
        assert _answers_after_idle(server, idle_s) is answered
    finally:
        server.stop()
