"""Timing: run an operation N times across K threads and report throughput and latency; and
alternate several systems over rounds, so the machine's noise falls on all of them alike."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar


@dataclass(frozen=True)
class Measurement:
    ops: int
    seconds: float
    p50_ms: float
    p99_ms: float
    # A sustained measurement's: how long after the last operation the server settled (its
    # indexing and sealing of what the operations wrote done); 0 for the others.
    settle_seconds: float = 0.0

    @property
    def per_second(self) -> float:
        """Operations per second of the timed operations alone."""
        return self.ops / self.seconds if self.seconds else 0.0

    @property
    def sustained_per_second(self) -> float:
        """Operations per second until the server settled: the background work they caused
        counted in their time."""
        total = self.seconds + self.settle_seconds
        return self.ops / total if total else 0.0

    def settled(self, settle_seconds: float) -> Measurement:
        return replace(self, settle_seconds=settle_seconds)


def measure(op: Callable[[int], object], ops: int, concurrency: int,
            setup: Callable[[], Callable[[int], object]] | None = None, *,
            per_thread: Sequence[Callable[[int], object]] | None = None) -> Measurement:
    """Call ``op(i)`` for i in range(ops) from ``concurrency`` threads.

    ``per_thread`` gives each thread its own operation (own HTTP client, own store…), and
    ``setup``, if given, builds one per thread; either way they are built, and the threads
    started, before the clock starts: the timed window holds the operations only.
    """
    if per_thread is None:
        per_thread = [setup() for _ in range(concurrency)] if setup is not None \
            else [op] * concurrency
    if len(per_thread) < concurrency:
        raise ValueError(f"{concurrency} threads need {concurrency} operations, "
                         f"{len(per_thread)} given")
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(ops))
    ready = threading.Barrier(concurrency + 1)
    errors: list[BaseException] = []

    def worker(fn: Callable[[int], object]) -> None:
        mine = []
        ready.wait()
        try:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                started = time.perf_counter()
                fn(i)
                mine.append(time.perf_counter() - started)
        except BaseException as exc:  # reported by the caller's thread
            errors.append(exc)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(per_thread[t],), daemon=True)
               for t in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0
    return Measurement(ops, elapsed, statistics.median(latencies) * 1000 if latencies else 0.0,
                       p99 * 1000)


T = TypeVar("T")


def rotated(names: Sequence[T], round_no: int) -> list[T]:
    """The order of round ``round_no``: each system goes first in turn."""
    k = round_no % len(names) if names else 0
    return list(names[k:]) + list(names[:k])


def alternate(runs: dict[str, Callable[[int], Measurement]], rounds: int, *,
              between: Callable[[], object] | None = None) -> dict[str, list[Measurement]]:
    """Run each system once per round, in a rotated order; every round's measurements.
    ``between`` runs before each measurement (the bench waits there for a server's
    background work, so that it does not fall on the system measured next)."""
    out: dict[str, list[Measurement]] = {name: [] for name in runs}
    for r in range(rounds):
        for name in rotated(list(runs), r):
            if between is not None:
                between()
            out[name].append(runs[name](r))
    return out


@dataclass(frozen=True)
class Summary:
    """The median of rounds, and their spread (min, max, (max - min) / median)."""

    median: float
    low: float
    high: float

    @property
    def spread(self) -> float:
        return (self.high - self.low) / self.median if self.median else 0.0

    def json(self) -> dict[str, Any]:
        return {"median": round(self.median, 3), "min": round(self.low, 3),
                "max": round(self.high, 3), "spread": round(self.spread, 3)}


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("no rounds to summarize")
    return Summary(statistics.median(values), min(values), max(values))


def ratio_of_rounds(numerator: Sequence[Measurement], denominator: Sequence[Measurement],
                    *, scale: float = 1.0, sustained: bool = False) -> Summary:
    """numerator/denominator throughput round by round (both ran in the same round, so they
    share its noise), summarized over the rounds. ``scale`` multiplies each ratio (items per
    operation when the two sides' operations carry different numbers of items);
    ``sustained`` compares throughput until the server settled."""
    def rate(m: Measurement) -> float:
        return m.sustained_per_second if sustained else m.per_second

    return summarize([rate(n) / rate(d) * scale
                      for n, d in zip(numerator, denominator, strict=True) if rate(d)])


def ratio_of_rounds_values(numerator: Sequence[float],
                           denominator: Sequence[float]) -> Summary:
    """The same for plain per-round figures (latencies)."""
    return summarize([n / d for n, d in zip(numerator, denominator, strict=True) if d])
