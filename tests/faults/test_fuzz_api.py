"""schemathesis against /openapi.json with a valid admin key: no input makes the server 5xx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ADMIN_KEY, Deployment

ST = Path(sys.executable).with_name("st")


@pytest.mark.timeout(600)
def test_no_generated_request_gets_a_server_error(deployment: Deployment) -> None:
    result = subprocess.run(
        [str(ST), "run", f"{deployment.server.base_url}/openapi.json",
         "--header", f"Authorization: Bearer {ADMIN_KEY}",
         "--checks", "not_a_server_error", "--phases", "examples,coverage,fuzzing",
         "--max-examples", "40", "--seed", "20261130", "--workers", "2"],
        capture_output=True, text=True, timeout=540,
    )
    summary = result.stdout[-3000:]
    assert result.returncode == 0, summary
    assert " passed" in summary and "failed" not in summary.split("Test cases:")[-1]
