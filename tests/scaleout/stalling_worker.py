"""``memplane worker`` with one checkpoint that never returns: the scale-out test's victim.

Run as ``python -m tests.scaleout.stalling_worker --lease-seconds N``. It is the real CLI
worker (same claim, lease and heartbeat code); the only difference is that when a job reaches
the step named in ``MEMPLANE_TEST_STALL_AT`` (e.g. ``erase:after_objects``) it writes the job
id into the file ``MEMPLANE_TEST_STALL_MARKER`` and waits forever, its heartbeat still renewing
the lease, until the test SIGKILLs it: a crash in the middle of a job, at a known step.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from control_plane.jobs.service import JobContext
from memplane.cli import main

STALL_AT = os.environ["MEMPLANE_TEST_STALL_AT"]
MARKER = Path(os.environ["MEMPLANE_TEST_STALL_MARKER"])
_original = JobContext.checkpoint


def _stall(self: JobContext, step: str) -> None:
    _original(self, step)
    if f"{self.kind}:{step}" == STALL_AT:
        MARKER.write_text(str(self.job_id))
        threading.Event().wait()


JobContext.checkpoint = _stall  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.argv = ["memplane", "worker", *sys.argv[1:]]
    main()
