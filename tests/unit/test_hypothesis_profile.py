"""The hypothesis profile the suite runs under: no per-example deadline, reproducible in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[2]


def test_no_example_has_a_deadline() -> None:
    assert settings.default is not None and settings.default.deadline is None


def _profile_in_a_fresh_process(env: dict[str, str]) -> str:
    probe = ("import tests.conftest; from hypothesis import settings as s; d = s.default; "
             "print(s.get_current_profile_name(), d.deadline, d.derandomize, d.database)")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CI", "MEMPLANE_HYPOTHESIS_PROFILE")}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, check=True, timeout=120)
    return done.stdout.strip()


def test_ci_runs_derandomised_examples_without_a_deadline() -> None:
    assert _profile_in_a_fresh_process({"CI": "true"}) == "ci None True None"


def test_a_developer_run_stays_random_without_a_deadline() -> None:
    out = _profile_in_a_fresh_process({})
    assert out.startswith("dev None False ")
