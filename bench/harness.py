"""Timing: run an operation N times across K threads and report throughput and latency."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    ops: int
    seconds: float
    p50_ms: float
    p99_ms: float

    @property
    def per_second(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0


def measure(op: Callable[[int], object], ops: int, concurrency: int,
            setup: Callable[[], Callable[[int], object]] | None = None) -> Measurement:
    """Call ``op(i)`` for i in range(ops) from ``concurrency`` threads.

    ``setup``, if given, builds a per-thread operation (own HTTP client, own session…).
    """
    latencies: list[float] = []
    lock = threading.Lock()
    local = threading.local()
    counter = iter(range(ops))

    def worker() -> None:
        fn = op
        if setup is not None:
            if not hasattr(local, "fn"):
                local.fn = setup()
            fn = local.fn
        mine = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            started = time.perf_counter()
            fn(i)
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0
    return Measurement(ops, elapsed, statistics.median(latencies) * 1000 if latencies else 0.0,
                       p99 * 1000)
