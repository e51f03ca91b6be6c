from __future__ import annotations

pytest_plugins = [
    "tests.support.emulator_fixtures",
    "tests.support.postgres",
    "tests.support.service",
]
