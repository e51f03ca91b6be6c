"""A pause point for crash tests that kill a real process (tests/faults).

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
