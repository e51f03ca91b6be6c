"""A pause point for crash tests that kill a real process (tests/faults), and a header
naming the serving process for tests of several workers.

With ``MEMPLANE_TEST_PAUSE_AT=<step>`` (a ``plane.checkpoint`` step name such as
``write:after_put``, ``erase:after_batch`` or ``export:before_upload``) and
``MEMPLANE_TEST_PAUSE_FILE=<path>`` both set, the first thread to reach that step creates
``<path>``, and every thread reaching it then blocks for good, so the test can SIGKILL the
process exactly there. Unset — always, outside these tests — the data plane keeps its no-op
checkpoint and nothing here runs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

PAUSE_AT = "MEMPLANE_TEST_PAUSE_AT"
PAUSE_FILE = "MEMPLANE_TEST_PAUSE_FILE"


def pause_from_env(environ: Mapping[str, str] = os.environ) -> Callable[[str], None] | None:
    step, marker = environ.get(PAUSE_AT), environ.get(PAUSE_FILE)
    if not step or not marker:
        return None
    forever = threading.Event()

    def checkpoint(reached: str) -> None:
        if reached != step:
            return
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            os.write(fd, f"{os.getpid()} {reached}\n".encode())
            os.close(fd)
        forever.wait()

    return checkpoint


PID_HEADER = "MEMPLANE_TEST_PID_HEADER"


class _PidHeader:
    """Adds ``x-memplane-pid: <the serving process's id>`` to every answer, so that a test of
    ``memplane serve --workers N`` sees which worker served each request."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any],
                       send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = (b"x-memplane-pid", str(os.getpid()).encode())

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        await self.app(scope, receive, sending)


def pid_header_from_env(environ: Mapping[str, str] = os.environ) -> type[_PidHeader] | None:
    """With ``MEMPLANE_TEST_PID_HEADER=1`` (tests of several workers only), the middleware
    that names the serving process in each answer; unset, None and nothing runs."""
    return _PidHeader if environ.get(PID_HEADER) == "1" else None
