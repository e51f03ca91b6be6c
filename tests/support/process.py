"""A `memplane serve` child process that a test can SIGKILL and restart on the same port,
and a TCP proxy that can cut a backend off and bring it back."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from .emulators import free_port

MEMPLANE = Path(sys.executable).with_name("memplane")
# The checkout these tests live in: the child serves its code, not whatever checkout the
# shared virtualenv's editable install points at.
CHECKOUT = Path(__file__).resolve().parents[2]


class ChildProcess:
    """A memplane child in its own session: ``kill`` is a SIGKILL of its whole group (what a
    crash or OOM kill does), ``stop`` a polite terminate that falls back to it."""

    process: subprocess.Popen[bytes] | None = None

    def kill(self) -> None:
        """SIGKILL: no shutdown handler, no flush — what a crash or OOM kill does."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


class ServerProcess(ChildProcess):
    def __init__(self, env: dict[str, str], *, port: int | None = None,
                 output: Path | None = None) -> None:
        """``output``: a file the child's stdout and stderr are appended to (else dropped).
        One server process unless ``env`` sets MEMPLANE_WORKERS: crash tests pause and kill
        the one that serves."""
        self.env = {**os.environ, "MEMPLANE_LOG_LEVEL": "WARNING", "MEMPLANE_WORKERS": "1",
                    **env}
        self.output = output
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(CHECKOUT), self.env.get("PYTHONPATH")) if p)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30, *, pause_at: str | None = None,
              pause_file: Path | None = None) -> ServerProcess:
        """Start (again, on the same port). With ``pause_at``, the process blocks every
        thread reaching that checkpoint step and creates ``pause_file`` when the first does
        (control_plane/testhooks.py); ``wait_for_pause`` then tells the test to kill it."""
        env = dict(self.env)
        if pause_at is not None:
            assert pause_file is not None
            env |= {"MEMPLANE_TEST_PAUSE_AT": pause_at, "MEMPLANE_TEST_PAUSE_FILE": str(pause_file)}
        with (open(self.output, "ab") if self.output else
              open(os.devnull, "wb")) as sink:
            self.process = subprocess.Popen(
                [str(MEMPLANE), "serve", "--port", str(self.port)], env=env,
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"memplane serve exited with {self.process.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return self
            time.sleep(0.05)
        raise RuntimeError("memplane serve did not answer in time")



def wait_for_pause(pause_file: Path, process: subprocess.Popen[bytes] | None,
                   timeout: float = 120) -> str:
    """Block until a child started with a pause point has reached it (it creates
    ``pause_file``); returns the file's text. Fails if the child exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pause_file.exists() and (text := pause_file.read_text()).endswith("\n"):
            return text
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process exited with {process.returncode} before pausing")
        time.sleep(0.02)
    raise RuntimeError(f"no pause reached in {timeout} s")


class WorkerProcess(ChildProcess):
    """A ``memplane worker`` child (jobs only, no HTTP) that a test can SIGKILL."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {**os.environ, "MEMPLANE_LOG_LEVEL": "WARNING", **env}
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(CHECKOUT), self.env.get("PYTHONPATH")) if p)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, pause_at: str | None = None,
              pause_file: Path | None = None) -> WorkerProcess:
        env = dict(self.env)
        if pause_at is not None:
            assert pause_file is not None
            env |= {"MEMPLANE_TEST_PAUSE_AT": pause_at, "MEMPLANE_TEST_PAUSE_FILE": str(pause_file)}
        self.process = subprocess.Popen([str(MEMPLANE), "worker"], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        return self


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a backend; ``cut()`` refuses and drops every connection
    until ``restore()``, like a network partition or a backend outage."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.restore()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            # The 5 s was for the connect only: left on, a backend slower than that to answer
            # one call (a long listing on a loaded machine) had the proxy drop the connection,
            # which the client saw as the bucket failing outside any outage.
            upstream.settimeout(None)
            with self._lock:
                self._conns |= {client, upstream}
            pumps = [2]  # the pair is closed by the second of its pumps to end
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b, pumps), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pumps: list[int]) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                pumps[0] -= 1
                last = pumps[0] == 0
                if last:  # else a long soak runs out of file descriptors
                    self._conns -= {src, dst}
            if last:
                src.close()
                dst.close()
