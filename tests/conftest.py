from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.support.emulator_fixtures",
    "tests.support.postgres",
    "tests.support.service",
]

# Hypothesis's default 200 ms deadline per example fails tests on a loaded machine (two cores
# shared by several jobs) for reasons that have nothing to do with the code, so no profile
# has one. In CI (CI=true, set by .ci/run) the examples are derandomised: the same inputs on
# every run, so a failure reproduces from the commit alone. Elsewhere they stay random (and
# print the blob that replays a failure). MEMPLANE_HYPOTHESIS_PROFILE picks one explicitly.
settings.register_profile(
    "ci", deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("MEMPLANE_HYPOTHESIS_PROFILE")
                      or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules holding a test marked ``slow`` run first, each module's tests kept together.

    The workers (pytest-xdist) take tests in this order, so the long ones (servers killed and
    restarted, the fuzzer, the wheel in a clean venv) overlap at the start, and the run ends on
    short tests that both workers finish at about the same time, not on one worker's last long
    test while the other waits.
    """
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)
