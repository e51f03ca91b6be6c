"""A throwaway PostgreSQL cluster for the test run, and pytest fixtures around it.

``initdb`` refuses to run as root, so as root the cluster is created and run as the
``postgres`` user through ``runuser``; as anyone else it runs as that user. Set
``MEMPLANE_TEST_DATABASE_URL`` to use a server you already run instead.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .emulator_fixtures import backend_unavailable
from .emulators import free_port


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    if not candidates:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")
    return candidates[0]


class PostgresCluster:
    """``durable=False`` (the default, for speed) turns off fsync and synchronous commit, so a
    crash of this server can lose its last commits: tests that crash PostgreSQL need durable."""

    def __init__(self, *, durable: bool = False, settings: tuple[str, ...] = ()) -> None:
        """``settings``: more ``name=value`` server settings (the soak logs its slow
        statements, lock waits and checkpoints with them)."""
        self.durable = durable
        self.settings = settings
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="memplane-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresCluster:
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--locale=C.UTF-8", *(() if self.durable else ("--no-sync",)))
        return self.resume()

    def resume(self) -> PostgresCluster:
        """Start (or restart) the server on the same port and data directory."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
        options += "-c max_connections=200"
        if self.durable:  # PostgreSQL's defaults, said explicitly: SHOW in the tests checks them
            options += " -c fsync=on -c synchronous_commit=on -c full_page_writes=on"
        else:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        options += "".join(f" -c {setting}" for setting in self.settings)
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w",
                  "-o", options, "start")
        return self

    @property
    def log_path(self) -> Path:
        """The server's own log (``pg_ctl -l``)."""
        return self.root / "log"

    def halt(self) -> None:
        """Stop the server at once, as a crash would; the data stays for resume()."""
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


class ExternalPostgres:
    """A server the developer runs; each test database is created on it."""

    def __init__(self, url: str) -> None:
        self.base = url

    def create_database(self, name: str | None = None) -> str:
        import psycopg
        from sqlalchemy.engine import make_url

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        parsed = make_url(self.base)
        plain = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return parsed.set(drivername="postgresql+psycopg", database=name).render_as_string(
            hide_password=False)


def _session_cluster(durable: bool, external_variable: str
                     ) -> Iterator[PostgresCluster | ExternalPostgres]:
    external = os.environ.get(external_variable)
    if external:
        yield ExternalPostgres(external)
        return
    cluster = PostgresCluster(durable=durable)
    started = time.monotonic()
    try:
        cluster.start()
    except Exception as exc:
        cluster.stop()
        detail = exc.stderr.decode(errors="replace")[-500:] if isinstance(
            exc, subprocess.CalledProcessError) and exc.stderr else str(exc)
        backend_unavailable(f"PostgreSQL did not start: {detail}")
    kind = "durable " if durable else ""
    print(f"\n{kind}PostgreSQL on port {cluster.port} ready in "
          f"{time.monotonic() - started:.1f} s")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster | ExternalPostgres]:
    """The suite's server, fast: fsync and synchronous commit off (its crash may lose the
    last commits, a crash of memplane alone loses nothing)."""
    yield from _session_cluster(False, "MEMPLANE_TEST_DATABASE_URL")


@pytest.fixture(scope="session")
def durable_postgres() -> Iterator[PostgresCluster | ExternalPostgres]:
    """A second server, started on first use, with ``fsync=on``, ``synchronous_commit=on``
    and ``full_page_writes=on``: for the fault tests that claim an acknowledged write
    survives (tests/faults/). ``MEMPLANE_TEST_DURABLE_DATABASE_URL`` names a server you run
    instead; tests/faults/test_durable_settings.py checks that it is durable."""
    yield from _session_cluster(True, "MEMPLANE_TEST_DURABLE_DATABASE_URL")
