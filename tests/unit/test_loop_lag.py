"""The event loop's lateness (observability/loop_lag.py): every wake in the histogram, a wake a
second or more late logged with what the process and the loop's thread did meanwhile."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from prometheus_client import CollectorRegistry, Histogram

from control_plane.observability.loop_lag import LoopWatch


def _histogram() -> Histogram:
    return Histogram("lag", "lag", registry=CollectorRegistry(), buckets=(0.5, 1, 5))


def _count(histogram: Histogram) -> tuple[float, float]:
    [metric] = histogram.collect()
    samples = {s.name: s.value for s in metric.samples}
    return samples["lag_count"], samples["lag_sum"]


def test_a_wake_a_second_late_is_a_warning_with_the_cpu_spent_meanwhile(
        caplog: pytest.LogCaptureFixture) -> None:
    histogram = _histogram()
    watch = LoopWatch(histogram)
    with caplog.at_level(logging.WARNING, logger="control_plane.observability.loop_lag"):
        watch.note(0.999, 0.5, 0.4)
        watch.note(-0.001, 0.0, 0.0)  # a timer a hair early counts as on time
        watch.note(8.6, 0.012, 0.0031)
    assert _count(histogram) == (3, pytest.approx(0.999 + 8.6))
    [record] = caplog.records
    assert (record.getMessage(), record.late_ms, record.process_cpu_ms,  # type: ignore[attr-defined]
            record.loop_thread_cpu_ms) == ("event loop late", 8600.0, 12.0, 3.1)  # type: ignore[attr-defined]


def test_a_loop_held_by_a_synchronous_call_is_seen_late(
        caplog: pytest.LogCaptureFixture) -> None:
    histogram = _histogram()
    watch = LoopWatch(histogram, period=0.05)

    async def main() -> None:
        task = asyncio.create_task(watch.run())
        await asyncio.sleep(0.12)  # the watch is waiting on its timer
        time.sleep(1.3)  # a synchronous call on the loop: every timer waits for it
        await asyncio.sleep(0.12)
        task.cancel()

    with caplog.at_level(logging.WARNING, logger="control_plane.observability.loop_lag"):
        asyncio.run(main())
    # the blocked second shows as a wake at least 1 s late (a loaded machine may add others)
    late = [r.late_ms for r in caplog.records  # type: ignore[attr-defined]
            if r.getMessage() == "event loop late"]
    assert late and max(late) >= 1000
    assert _count(histogram)[0] >= 3
