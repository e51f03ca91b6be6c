"""Time that moves only when a test says so, for the TTLs, leases and heartbeats in the code.

``ManualClock`` stands in for ``time.monotonic`` (the auth cache, the storage-config cache),
``ManualWallClock`` for ``utcnow`` (job leases), and ``Beats`` for the wait between two lease
renewals of a job's heartbeat: the heartbeat renews only when the test releases a beat, and
the test can wait until that renewal is done. Nothing here sleeps to synchronise; the one
wait with a deadline is there so a broken test fails instead of hanging.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from control_plane.db.base import utcnow

DEADLINE_SECONDS = 60.0


class ManualClock:
    """Monotonic seconds, moved by ``advance``."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ManualWallClock:
    """An aware UTC datetime, moved by ``advance``; starts at the real time so rows it stamps
    sort with rows stamped by the real clock."""

    def __init__(self, start: datetime | None = None) -> None:
        self.start = start or utcnow()
        self.now = self.start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Beats:
    """A ``pause`` for the job heartbeat that lasts until the test releases one beat.

    ``pauses`` counts how often the heartbeat has started to wait: after ``release()``,
    ``wait_for_pauses(n + 1)`` returns once the renewal that followed pause ``n`` is done.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.pauses = 0
        self._released = 0
        self.asked: list[float] = []

    def __call__(self, stop: threading.Event, seconds: float) -> bool:
        with self._cond:
            self.pauses += 1
            self.asked.append(seconds)
            self._cond.notify_all()
            # The heartbeat's stop event does not notify this condition, so look at it
            # now and then; this only bounds how soon a stopped heartbeat notices.
            while not stop.is_set():
                if self._released >= self.pauses:
                    return False
                self._cond.wait(0.05)
            return True

    def release(self) -> None:
        with self._cond:
            self._released += 1
            self._cond.notify_all()

    def wait_for_pauses(self, count: int) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.pauses >= count, DEADLINE_SECONDS):
                raise AssertionError(f"the heartbeat paused {self.pauses} times, not {count}")


def wait_until(condition: Callable[[], bool], what: str,
               seconds: float = DEADLINE_SECONDS) -> None:
    """Poll ``condition()`` until true; fail after a generous deadline (never a timing check)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds:.0f} s")
        time.sleep(0.01)
