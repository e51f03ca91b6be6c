"""The daily run's schedule (MEMPLANE_COMPACTOR_SCHEDULE) on an injected clock: nothing
before the fire time, one job per active tenant and UTC day however many workers tick (the
unique job key), the next one the next day, and a late-started worker catching up."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from control_plane.compactor import repository
from control_plane.db.models import CompactorSettings
from control_plane.job_handlers import JobWorker
from control_plane.runtime import Runtime
from control_plane.schedules import parse_schedule
from control_plane.settings import Settings
from tests.support.clock import DEADLINE_SECONDS, ManualWallClock

from .helpers import at, jobs_of, new_tenant, own_runtime, raw_events

SCHEDULE = "17 6 * * *"


@pytest.fixture
def runtime(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    with own_runtime(database, request, tmp_path, compactor_schedule=SCHEDULE) as rt:
        yield rt  # type: ignore[misc]


def _worker(runtime: Runtime, clock: ManualWallClock, name: str) -> JobWorker:
    return JobWorker(runtime.sessions, runtime.plane, runtime.settings, owner=name, clock=clock)


def _tenants(runtime: Runtime) -> tuple[list[object], object, object]:
    """Two active tenants, one without events, one with its compactor turned off."""
    active = [new_tenant(runtime, "a"), new_tenant(runtime, "b")]
    for tenant_id in active:
        raw_events(runtime, tenant_id, 3)
    idle = new_tenant(runtime, "idle")
    off = new_tenant(runtime, "off")
    raw_events(runtime, off, 3)
    with runtime.sessions() as session:
        session.add(CompactorSettings(tenant_id=off, min_events=3, older_than_days=90,
                                      enabled=False))
        session.commit()
    return active, idle, off


def test_one_job_per_active_tenant_and_day_however_many_workers_tick(
        runtime: Runtime) -> None:
    active, _, _ = _tenants(runtime)
    clock = ManualWallClock(at("2026-03-02T06:16:59+00:00"))
    first, second = _worker(runtime, clock, "w1"), _worker(runtime, clock, "w2")

    assert (first.tick_schedule(), second.tick_schedule()) == (0, 0)
    assert jobs_of(runtime) == []

    clock.advance(1)  # 06:17:00
    queued = first.tick_schedule() + second.tick_schedule()
    jobs = jobs_of(runtime)
    assert queued == 2
    assert Counter(j.tenant_id for j in jobs) == Counter(active)
    assert {(j.dedupe_key, j.state, j.params["scheduled_for"]) for j in jobs} == {
        ("compact:2026-03-02", "queued", "2026-03-02")}

    clock.advance(6 * 3600)  # same day, later: nobody queues again, not even a new worker
    late = _worker(runtime, clock, "w3")
    assert (first.tick_schedule(), second.tick_schedule(), late.tick_schedule()) == (0, 0, 0)
    assert len(jobs_of(runtime)) == 2

    clock.advance(24 * 3600 - 6 * 3600 - 1)  # next day 06:16:59
    assert first.tick_schedule() + second.tick_schedule() == 0
    clock.advance(1)
    assert second.tick_schedule() + first.tick_schedule() == 2
    jobs = jobs_of(runtime)
    assert Counter(j.dedupe_key for j in jobs) == {"compact:2026-03-02": 2,
                                                   "compact:2026-03-03": 2}


def test_a_worker_down_at_the_fire_time_catches_up_later_that_day(runtime: Runtime) -> None:
    active, _, _ = _tenants(runtime)
    clock = ManualWallClock(at("2026-03-02T15:40:00+00:00"))
    assert _worker(runtime, clock, "started-late").tick_schedule() == 2
    assert sorted(j.tenant_id for j in jobs_of(runtime)) == sorted(active)
    # A fresh start after midnight does not replay yesterday's run: before 06:17 nothing.
    clock.advance(9 * 3600)  # 00:40 the next day
    assert _worker(runtime, clock, "next-day").tick_schedule() == 0
    assert len(jobs_of(runtime)) == 2


def test_schedulers_racing_insert_one_job(runtime: Runtime,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Both workers read the active tenants before either inserts (a barrier holds them):
    the unique key, not a prior read, makes it one job."""
    active, _, _ = _tenants(runtime)
    clock = ManualWallClock(at("2026-03-02T06:17:00+00:00"))
    barrier = threading.Barrier(2, timeout=DEADLINE_SECONDS)
    read = repository.active_tenants

    def read_then_wait(session):  # type: ignore[no-untyped-def]
        found = read(session)
        barrier.wait()
        return found

    monkeypatch.setattr(repository, "active_tenants", read_then_wait)
    workers = [_worker(runtime, clock, f"w{i}") for i in range(2)]
    queued: list[int] = []
    threads = [threading.Thread(target=lambda w=w: queued.append(w.tick_schedule()))
               for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    assert sum(queued) == 2 and len(queued) == 2
    assert Counter(j.tenant_id for j in jobs_of(runtime)) == Counter(active)


def test_the_schedule_off_queues_nothing(database: str, request: pytest.FixtureRequest,
                                         tmp_path: Path) -> None:
    with own_runtime(database, request, tmp_path, compactor_schedule="off") as runtime:
        raw_events(runtime, new_tenant(runtime), 3)
        clock = ManualWallClock(at("2026-03-02T06:17:00+00:00"))
        assert _worker(runtime, clock, "w").tick_schedule() == 0
        assert jobs_of(runtime) == []


@pytest.mark.parametrize("expression", ["61 6 * * *", "17 6 * *", "0 17 6 * * *", "daily"])
def test_an_invalid_schedule_is_refused_at_start(expression: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(compactor_schedule=expression)
    message = str(raised.value)
    assert "MEMPLANE_COMPACTOR_SCHEDULE" in message and repr(expression) in message
    assert "'17 6 * * *'" in message


def test_due_today_and_next_run() -> None:
    schedule = parse_schedule(" 17  6 * * * ")
    assert schedule.expression == SCHEDULE
    assert schedule.due_today(at("2026-03-02T06:16:59.999999+00:00")) is None
    assert schedule.due_today(at("2026-03-02T06:17:00+00:00")) == at("2026-03-02T06:17:00+00:00")
    assert schedule.due_today(at("2026-03-02T23:59:59+00:00")) == at("2026-03-02T06:17:00+00:00")
    assert schedule.next_after(at("2026-03-02T06:17:00+00:00")) == at("2026-03-03T06:17:00+00:00")
    assert parse_schedule("OFF").due_today(at("2026-03-02T07:00:00+00:00")) is None
    assert Settings().compactor_schedule == SCHEDULE
