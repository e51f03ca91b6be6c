from __future__ import annotations

import os

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
