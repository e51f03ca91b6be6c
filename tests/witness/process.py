"""A real `memplane witness serve` child process, started from this checkout."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.emulators import free_port
from tests.support.process import CHECKOUT, MEMPLANE, ChildProcess


def cli_env() -> dict[str, str]:
    env = {**os.environ}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    return env


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MEMPLANE), *args], env=cli_env(), capture_output=True,
                          text=True, timeout=60, check=False)


class WitnessProcess(ChildProcess):
    def __init__(self, key: Path, log_vkeys: list[str], state: Path,
                 port: int | None = None) -> None:
        self.args = ["witness", "serve", "--key", str(key), "--state", str(state),
                     *(a for vkey in log_vkeys for a in ("--log-vkey", vkey))]
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output = state.parent / f"witness-{self.port}.log"

    def start(self, timeout: float = 30) -> WitnessProcess:
        with open(self.output, "ab") as sink:
            self.process = subprocess.Popen(
                [str(MEMPLANE), *self.args, "--port", str(self.port)], env=cli_env(),
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"memplane witness serve exited with "
                                   f"{self.process.returncode}: {self.output.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/", timeout=1).status_code == 200:
                    return self
            time.sleep(0.05)
        raise RuntimeError("memplane witness serve did not answer in time")

    def add_checkpoint(self, body: bytes) -> httpx.Response:
        return httpx.post(f"{self.url}/add-checkpoint", content=body, timeout=10)
