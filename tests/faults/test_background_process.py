"""``memplane serve`` runs the audit sealer and the search indexer in a process of its own
(control_plane.background): the work gets done there, the process is started again when it
dies, and it dies with the server, SIGKILL included. On SQLite too, its writers taking turns
with the server's through a lock file."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, func, select

from control_plane.db.engine import make_engine
from control_plane.db.models import AccessLog
from tests.support.clock import wait_until
from tests.support.postgres import ExternalPostgres, PostgresCluster
from tests.support.process import ServerProcess

from .conftest import ADMIN_KEY, make_env

pytestmark = pytest.mark.slow


def _children(pid: int) -> dict[int, str]:
    """The live child processes of ``pid``: pid → command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry)] = command
    return found


def _background(pid: int) -> list[int]:
    return [child for child, command in _children(pid).items() if "spawn_main" in command]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _embedded(http: httpx.Client, key: str) -> bool:
    return bool(http.get(f"/v1/memories/user/alice/{key}").json()["pointer"]["has_embeddings"])


@pytest.fixture
def served(durable_postgres: PostgresCluster | ExternalPostgres,
           tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    url = durable_postgres.create_database()
    env = make_env(url, tmp_path) | {"MEMPLANE_EMBED_ON_WRITE": "true"}
    server = ServerProcess(env).start()
    try:
        yield server, url
    finally:
        server.stop()


def _unsealed(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(
            select(func.count()).select_from(AccessLog).where(AccessLog.seq.is_(None))) or 0)


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, timeout=10,
                        headers={"Authorization": f"Bearer {ADMIN_KEY}"})


def test_the_background_process_seals_and_indexes(served: tuple[ServerProcess, str]) -> None:
    server, url = served
    assert server.process is not None
    pid = server.process.pid
    wait_until(lambda: bool(_background(pid)), "the background process's start")
    children = _background(pid)
    with _client(server) as http:
        for n in range(3):
            assert http.put(f"/v1/memories/user/alice/k{n}",
                            json={"value": {"text": f"violet umbrella {n}"}}).status_code == 200
        wait_until(lambda: all(_embedded(http, f"k{n}") for n in range(3)),
                   "the vectors of the three writes")
    engine = make_engine(url)
    try:
        wait_until(lambda: _unsealed(engine) == 0, "the sealing of every audit row")
        with engine.connect() as connection:
            rows = connection.scalar(select(func.count()).select_from(AccessLog))
    finally:
        engine.dispose()
    assert len(children) == 1
    assert rows is not None and rows >= 6  # three writes, three reads, sealed in a chain


def test_the_background_process_restarts_and_dies_with_the_server(
        served: tuple[ServerProcess, str]) -> None:
    server, _ = served
    assert server.process is not None
    pid = server.process.pid
    wait_until(lambda: bool(_background(pid)), "the background process's start")
    first = _background(pid)
    os.kill(first[0], signal.SIGKILL)
    wait_until(lambda: any(c not in first for c in _background(pid)),
               "the background process's restart")
    second = [c for c in _background(pid) if c not in first]
    with _client(server) as http:
        assert http.put("/v1/memories/user/alice/after",
                        json={"value": {"text": "a green kite"}}).status_code == 200
        wait_until(lambda: _embedded(http, "after"), "the vector of the write after it")
    os.kill(pid, signal.SIGKILL)  # the server alone, not its process group
    server.process.wait(timeout=10)
    wait_until(lambda: not _alive(second[0]), "the background process's end", seconds=10)
    assert len(first) == 1 and len(second) == 1


def test_serve_on_sqlite_runs_its_background_process_too(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memplane.db'}"
    env = make_env(url, tmp_path) | {"MEMPLANE_EMBED_ON_WRITE": "true"}
    server = ServerProcess(env).start()
    try:
        assert server.process is not None
        pid = server.process.pid
        wait_until(lambda: bool(_background(pid)), "the background process's start")
        children = _background(pid)
        with _client(server) as http:
            # The server's writes and the background process's (vectors, segments, seals)
            # take turns across the two processes.
            for n in range(20):
                assert http.put(f"/v1/memories/user/alice/k{n}",
                                json={"value": {"text": f"violet umbrella {n}"}}
                                ).status_code == 200
            wait_until(lambda: all(_embedded(http, f"k{n}") for n in range(20)),
                       "the vectors of the twenty writes")
        engine = make_engine(url)
        try:
            wait_until(lambda: _unsealed(engine) == 0, "the sealing of every audit row")
        finally:
            engine.dispose()
    finally:
        server.stop()
    assert len(children) == 1
    wait_until(lambda: not _alive(children[0]), "the background process's end", seconds=20)


def _environment(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        pairs = [item.split(b"=", 1) for item in environ.read().split(b"\0") if b"=" in item]
    return {k.decode(): v.decode() for k, v in pairs}


@pytest.mark.parametrize("chosen", [None, "4"])
def test_serve_limits_the_allocators_arenas_in_its_processes_unless_the_operator_chose(
        tmp_path: Path, chosen: str | None) -> None:
    env = make_env(f"sqlite:///{tmp_path / 'memplane.db'}", tmp_path)
    env["MEMPLANE_EMBED_ON_WRITE"] = "true"  # the background process indexes
    server = ServerProcess(env)
    server.env.pop("MALLOC_ARENA_MAX", None)  # whatever the test's own environment holds
    if chosen is not None:
        server.env["MALLOC_ARENA_MAX"] = chosen
    server.start()
    try:
        assert server.process is not None
        pid = server.process.pid
        wait_until(lambda: bool(_background(pid)), "the background process's start")
        [child] = _background(pid)
        assert _environment(child)["MALLOC_ARENA_MAX"] == (chosen or "2")
        assert _environment(pid).get("MALLOC_ARENA_MAX") == chosen
    finally:
        server.stop()
