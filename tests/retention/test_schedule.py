"""The daily retention run's schedule (MEMPLANE_RETENTION_SCHEDULE) on an injected clock:
nothing before the fire time, one job per tenant with a policy or a ttl_days memory and UTC
day however many workers tick, and the next one the next day."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from control_plane.job_handlers import JobWorker
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from tests.compactor.helpers import jobs_of, new_tenant, own_runtime
from tests.retention.helpers import policy, put
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld


@pytest.fixture
def runtime(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    with own_runtime(database, request, tmp_path, retention_schedule="30 3 * * *",
                     compactor_schedule="off") as rt:
        yield rt  # type: ignore[misc]


def test_one_run_per_tenant_and_day(runtime: Runtime) -> None:
    with_policy = ServiceWorld(runtime, new_tenant(runtime, "policy"))
    with_ttl = ServiceWorld(runtime, new_tenant(runtime, "ttl"))
    new_tenant(runtime, "idle")
    policy(with_policy, scope="user", retention_days=30, auto_delete=True)
    put(with_ttl, "user", "u1", "k", ttl_days=5)
    clock = ManualWallClock(datetime.fromisoformat("2026-03-02T03:29:59+00:00"))
    first = JobWorker(runtime.sessions, runtime.plane, runtime.settings, owner="w1", clock=clock)
    second = JobWorker(runtime.sessions, runtime.plane, runtime.settings, owner="w2", clock=clock)

    assert (first.tick_retention(), second.tick_retention()) == (0, 0)
    clock.advance(1)
    assert first.tick_retention() + second.tick_retention() == 2
    assert first.tick_retention() == 0  # once per worker and day
    jobs = jobs_of(runtime, "retention")
    assert sorted(j.tenant_id for j in jobs) == sorted([with_policy.tenant_id,
                                                         with_ttl.tenant_id])
    assert {j.dedupe_key for j in jobs} == {"retention:2026-03-02"}

    clock.advance(86400)
    third = JobWorker(runtime.sessions, runtime.plane, runtime.settings, owner="w3", clock=clock)
    assert third.tick_retention() == 2
    assert {j.dedupe_key for j in jobs_of(runtime, "retention")} == {
        "retention:2026-03-02", "retention:2026-03-03"}


def test_a_bad_schedule_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path, retention_schedule="every day")
    assert "MEMPLANE_RETENTION_SCHEDULE 'every day' is not a cron expression" in str(
        refused.value)
    assert Settings(data_dir=tmp_path, retention_schedule="off").retention_schedule == "off"
