"""Overwrites and appends across SIGKILLs: after every kill and ``reconcile``, each key reads
the last value acknowledged for it or a later one sent but never acknowledged, never an
older one, and its ``version`` never goes back.

Each writer owns a few keys and writes them again and again with increasing numbers (``PUT``
of ``"<key>:<n>"``), and appends increasing numbers to a list of its own (``.../append``).
One writer per key, so the order of its writes is known: the last acknowledged value of a key
is the one to read back (an unacknowledged later write may have committed before its answer
was lost to the kill). The kills land at chosen moments — every write in flight paused with
its object stored and its pointer not moved (``write:after_put``), or committed and not
answered (``write:after_commit``) — after a random number of acknowledgements, and, on
PostgreSQL, together with an immediate stop of the database (a crash of both: the database
then recovers from its log, which ``fsync=on`` and ``synchronous_commit=on`` made durable at
each acknowledged commit). After each kill, ``reconcile`` and orphan GC run with the server
down, the server starts again, and every key is read through the server's verified read.

On the embedded default (SQLite) and the durable PostgreSQL, with a local bucket, and with an
S3 emulator bucket (moto) on PostgreSQL.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import select

from control_plane.db.models import MemoryPointer
from control_plane.integrity.reconcile import collect_orphans, reconcile
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from storage_adapters.registry import from_url
from tests.support.emulators import new_s3_bucket
from tests.support.postgres import PostgresCluster
from tests.support.process import ServerProcess, wait_for_pause

from .conftest import Deployment, make_env

pytestmark = pytest.mark.slow

WRITERS = 4
KEYS_PER_WRITER = 5  # overwritten keys; each writer has one appended list besides
MOMENTS = ["write:after_put", "write:after_commit", "random"] * 2 + ["database"]
PATH = "/v1/memories/agent/overwrites/"


@dataclass
class Crashable:
    """A deployment, and its database server when the test may crash that too."""

    deployment: Deployment
    cluster: PostgresCluster | None


@pytest.fixture(params=["sqlite-local", "postgresql-local", "postgresql-s3"])
def crashable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Crashable]:
    database, bucket = request.param.split("-")
    cluster = None
    if database == "postgresql":
        server_of_databases = request.getfixturevalue("durable_postgres")
        url = server_of_databases.create_database()
        if isinstance(server_of_databases, PostgresCluster):
            cluster = server_of_databases
    else:
        url = f"sqlite:///{tmp_path / 'memplane.db'}"
    bucket_url = None
    if bucket == "s3":
        config = new_s3_bucket(request.getfixturevalue("moto_server"))
        query = {k: v for k, v in config.items() if k != "bucket"}
        bucket_url = f"s3://{config['bucket']}?{urlencode(query)}"
    env = make_env(url, tmp_path, bucket_url)
    server = ServerProcess(env).start()
    try:
        yield Crashable(Deployment(env, server, tmp_path / "bucket"), cluster)
    finally:
        server.stop()


@dataclass
class Key:
    """What the test sent to one key and what the server acknowledged, in order."""

    sent: list[int] = field(default_factory=list)  # every number sent, acknowledged or not
    acked: list[tuple[int, int]] = field(default_factory=list)  # (number, version) answered
    seen: tuple[Any, int] | None = None  # (value, version) the last check read


class Load:
    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.keys: dict[str, Key] = {}
        for t in range(WRITERS):
            for i in range(KEYS_PER_WRITER):
                self.keys[f"w{t}-o{i}"] = Key()
            self.keys[f"w{t}-list"] = Key()
        self.refused: list[tuple[str, int, str]] = []
        self.writes = 0
        self.cond = threading.Condition()
        self.up = threading.Event()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._writer, args=(t,)) for t in range(WRITERS)]

    def start(self) -> None:
        self.up.set()
        for thread in self.threads:
            thread.start()

    def _writer(self, t: int) -> None:
        own = [f"w{t}-o{i}" for i in range(KEYS_PER_WRITER)] + [f"w{t}-list"]
        rng = random.Random(t)
        while not self.stop.is_set():
            self.up.wait()
            with self.deployment.http() as http:
                while self.up.is_set() and not self.stop.is_set():
                    key = rng.choice(own)
                    state = self.keys[key]
                    with self.cond:
                        n = len(state.sent)
                        state.sent.append(n)
                    try:
                        if key.endswith("-list"):
                            response = http.post(f"{PATH}{key}/append", json={"value": n})
                        else:
                            response = http.put(f"{PATH}{key}", json={"value": f"{key}:{n}"})
                    except httpx.TransportError:
                        break  # the server is down: wait until it is back
                    with self.cond:
                        if response.status_code == 200:
                            state.acked.append((n, response.json()["version"]))
                            self.writes += 1
                            self.cond.notify_all()
                        else:
                            self.refused.append((key, response.status_code, response.text))

    def wait_writes(self, count: int, timeout: float = 120) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.writes >= count, timeout), \
                f"only {self.writes} writes acknowledged"

    def finish(self) -> None:
        self.stop.set()
        self.up.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in self.threads)


def _settle(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``reconcile`` and orphan GC (grace 0) on the deployment's configuration, the server
    down; nothing corrupt, nothing it could not do. Returns the bucket's objects' paths and
    the pointers' storage paths."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runtime = Runtime(Settings())
    try:
        with runtime.sessions() as session:
            settled = reconcile(session, runtime.plane, grace_seconds=0)
            collected = collect_orphans(session, runtime.plane, grace_seconds=0)
            paths = sorted(p.storage_path for p in session.scalars(select(MemoryPointer)))
        assert settled.errors == [] and settled.corrupt == 0, settled
        assert collected.waiting == 0, collected
    finally:
        runtime.close()
    objects = sorted(info.path for info in from_url(env["MEMPLANE_DEFAULT_BUCKET_URL"]).list("")
                     if "/memories/" in info.path)
    return [objects, paths, settled, collected]


def _check(load: Load, http: httpx.Client) -> int:
    """Read every key; returns how many versions were checked."""
    checked = 0
    for key, state in load.keys.items():
        response = http.get(f"{PATH}{key}")
        with load.cond:
            sent, acked = list(state.sent), list(state.acked)
        if not acked:
            assert response.status_code in (200, 404), (key, response.text)
            if response.status_code == 404:
                assert state.seen is None, (key, "was read before, now gone")
                continue
        assert response.status_code == 200, (key, response.status_code, response.text)
        body = response.json()
        value, version = body["value"], body["pointer"]["version"]
        last_n, last_version = acked[-1] if acked else (-1, 0)
        assert version >= last_version, (key, version, acked[-1:])
        current: Any = value
        if key.endswith("-list"):
            # Every acknowledged item, in order, nothing never sent; the list only grows.
            assert value == sorted(set(value)), (key, value)
            assert {n for n, _ in acked} <= set(value) <= set(sent), (key, value, acked)
            if state.seen is not None:
                assert value[:len(state.seen[0])] == state.seen[0], (key, state.seen, value)
        else:
            name, _, number = value.rpartition(":")
            current = n = int(number)
            assert name == key and n in sent and n >= last_n, (key, value, acked[-1:])
            if state.seen is not None:
                assert n >= state.seen[0], (key, "older than read before", state.seen, value)
        if state.seen is not None:
            assert version >= state.seen[1], (key, "version went back", state.seen, version)
            if current != state.seen[0]:
                assert version > state.seen[1], (key, "changed without a new version")
        state.seen = (current, version)
        checked += 1
    return checked


@pytest.mark.timeout(900)
def test_overwrites_and_appends_never_revert_across_kills(
        crashable: Crashable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    deployment, cluster = crashable.deployment, crashable.cluster
    server = deployment.server
    load = Load(deployment)
    rng = random.Random(46)
    moments = [m for m in MOMENTS if m != "database" or cluster is not None]
    rng.shuffle(moments)
    figures: dict[str, Any] = {"kills": [], "versions_checked": 0, "orphans_deleted": 0}
    load.start()
    try:
        for n, moment in enumerate(moments):
            load.wait_writes(load.writes + rng.randint(20, 60))
            if moment.startswith("write:"):
                load.up.clear()
                server.kill()
                pause_file = tmp_path / f"pause-{n}"
                server.start(pause_at=moment, pause_file=pause_file)
                load.up.set()
                wait_for_pause(pause_file, server.process)
            load.up.clear()
            server.kill()
            if moment == "database":
                assert cluster is not None
                cluster.halt()  # as a crash would: no checkpoint, recovery from the log
                cluster.resume()
            figures["kills"].append(moment)
            _, _, _, collected = _settle(deployment.env, monkeypatch)
            figures["orphans_deleted"] += collected.orphans_deleted
            server.start()
            with deployment.http() as http:
                figures["versions_checked"] += _check(load, http)
            load.up.set()
        load.wait_writes(load.writes + 40)
    finally:
        load.finish()

    assert load.refused == []  # a restarted server answers writes, it does not refuse them
    # Each key's acknowledged versions rise with every acknowledged write, across the kills.
    for key, state in load.keys.items():
        versions = [v for _, v in state.acked]
        assert versions == sorted(set(versions)), (key, versions)
        assert len(state.acked) >= 2, (key, "written too rarely to show an overwrite")
    # After the last settle the bucket holds exactly the pointers' objects: every overwrite's
    # earlier object, and every orphan a kill left, is gone.
    server.kill()
    objects, paths, _, _ = _settle(deployment.env, monkeypatch)
    assert objects == paths
    server.start()
    with deployment.http() as http:
        figures["versions_checked"] += _check(load, http)
    figures |= {"keys": len(load.keys), "acknowledged_writes": load.writes,
                "sent_writes": sum(len(s.sent) for s in load.keys.values()),
                "max_version": max(s.seen[1] for s in load.keys.values() if s.seen)}
    print(json.dumps(figures))
