"""The README's first command: `memplane serve` on the embedded default, then PUT and GET."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.emulators import free_port

MEMPLANE = Path(sys.executable).with_name("memplane")


def _serve(data_dir: Path, port: int, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(MEMPLANE), "serve", "--port", str(port)], cwd=data_dir.parent, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "MEMPLANE_DATA_DIR": str(data_dir), **env},
    )


def _wait(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("memplane serve did not become ready")


def _stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    output, _ = process.communicate(timeout=15)
    return output


@pytest.mark.slow
def test_serve_prints_a_key_once_and_answers_put_then_get(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    process = _serve(data_dir, port, {})
    try:
        _wait(port)
        output = _stop(process)
    finally:
        process.kill()
    keys = re.findall(r"^\s+(mp_\S+)$", output, re.MULTILINE)
    assert len(keys) == 1

    process = _serve(data_dir, port, {})
    try:
        _wait(port)
        headers = {"Authorization": f"Bearer {keys[0]}"}
        url = f"http://127.0.0.1:{port}/v1/memories/user/u1/preferred_language"
        put = httpx.put(url, json={"value": "fr"}, headers=headers)
        get = httpx.get(url, headers=headers)
        second_output = _stop(process)
    finally:
        process.kill()
    assert put.status_code == 200 and put.json()["sync_status"] == "synced"
    assert get.status_code == 200 and get.json()["value"] == "fr"
    assert "mp_" not in second_output  # the key is shown on first start only
    assert (data_dir / "memplane.db").exists()
    stored = [p for p in (data_dir / "bucket" / "tenants").rglob("*.json")
              if "memories" in p.parts]  # not the audit chain's checkpoints
    assert len(stored) == 1


SCRIPTED_KEY = "mp_scripted_key_0123456789abcdefghij"  # at least 32 characters


@pytest.mark.slow
def test_admin_key_from_the_environment_is_used(tmp_path: Path) -> None:
    port = free_port()
    process = _serve(tmp_path / "data", port, {"MEMPLANE_ADMIN_KEY": SCRIPTED_KEY})
    try:
        _wait(port)
        answer = httpx.get(f"http://127.0.0.1:{port}/v1/pointers",
                           headers={"Authorization": f"Bearer {SCRIPTED_KEY}"})
        output = _stop(process)
    finally:
        process.kill()
    assert answer.status_code == 200
    assert answer.json() == {"items": [], "next_cursor": None}
    assert SCRIPTED_KEY not in output
