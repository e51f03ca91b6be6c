"""How late the server's event loop wakes, so a stall that holds every request (the slow
requests of one instant, across routes and tenants) says where it was.

A timer on the loop asks to wake every ``PERIOD`` seconds and notes how late it woke
(``memplane_event_loop_lag_seconds``). A wake ``WARN_AFTER`` seconds late or more is logged as
a warning with what the process did meanwhile:

- ``loop_thread_cpu_ms`` close to the lateness: the loop itself was busy — a synchronous call
  made on it;
- ``process_cpu_ms`` high and the loop's low: other threads held the interpreter (the GIL);
- both low: the process was not running — the machine's other work had its cores — or the
  loop's thread waited in a system call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

PERIOD = 0.25
WARN_AFTER = 1.0

log = logging.getLogger(__name__)


class LoopWatch:
    def __init__(self, histogram: Any, *, period: float = PERIOD,
                 warn_after: float = WARN_AFTER,
                 clock: Callable[[], float] = time.monotonic,
                 process_cpu: Callable[[], float] = time.process_time,
                 thread_cpu: Callable[[], float] = time.thread_time) -> None:
        self.histogram, self.period, self.warn_after = histogram, period, warn_after
        self.clock, self.process_cpu, self.thread_cpu = clock, process_cpu, thread_cpu

    def note(self, late: float, process_cpu: float, loop_cpu: float) -> None:
        """One wake ``late`` seconds late, while the process used ``process_cpu`` seconds of
        CPU and the loop's own thread ``loop_cpu``."""
        late = max(0.0, late)
        self.histogram.observe(late)
        if late >= self.warn_after:
            log.warning("event loop late", extra={
                "late_ms": round(late * 1000, 1),
                "process_cpu_ms": round(process_cpu * 1000, 1),
                "loop_thread_cpu_ms": round(loop_cpu * 1000, 1)})

    async def run(self) -> None:
        """Watch until cancelled (the app's lifespan cancels it)."""
        while True:
            started, cpu, loop_cpu = self.clock(), self.process_cpu(), self.thread_cpu()
            await asyncio.sleep(self.period)
            self.note(self.clock() - started - self.period, self.process_cpu() - cpu,
                      self.thread_cpu() - loop_cpu)
