"""SIGKILL the server again and again under concurrent writes; nothing acknowledged is lost
(I2), no synced pointer lacks its object or names another value (I1), and reconcile + GC
leave the bucket exact: its memories/ tree is the pointers' paths, no temporary file left.

Every write has a key of its own, so each acknowledged write is checked on its own: its
object is read from the bucket directory and decrypted here, with the project's envelope
code and the deployment's key ring, and the value's SHA-256 is recomputed from what the test
sent. Half the kills land at a chosen moment: the server is started with a pause point at
``write:after_put`` (control_plane/testhooks.py), so every write in flight stops with its
object stored and its pointer not committed, and is killed there — the orphans reconcile
must report. The other half land after a random number of acknowledgements.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from control_plane.db.models import MemoryPointer
from control_plane.integrity.reconcile import collect_orphans, reconcile
from control_plane.memories.api import serialise
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from tests.support.crypto import open_stored
from tests.support.process import wait_for_pause

from .conftest import Deployment

pytestmark = pytest.mark.slow

WRITERS = 8
# Each kill restarts the server (~4 s here): four of each kind keep the run near a minute.
PAUSED_KILLS = 4
RANDOM_KILLS = 4
MIN_ACKED = 300
TMP_DIR = ".memplane-tmp"


@pytest.fixture
def deployment(any_deployment: Deployment) -> Deployment:
    """PostgreSQL and the embedded default's SQLite (tests/faults/conftest.py)."""
    return any_deployment


@pytest.fixture
def runtime(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """The deployment's own configuration in this process: its database, bucket, key ring."""
    for name, value in deployment.env.items():
        monkeypatch.setenv(name, value)
    rt = Runtime(Settings())
    try:
        yield rt
    finally:
        rt.close()


class Load:
    """Writers with a unique key per write; the test knows every value it ever sent."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.sent: dict[str, str] = {}  # key -> the value sent (acknowledged or not)
        self.acked: set[str] = set()
        self.refused: list[tuple[str, int, str]] = []
        self.cond = threading.Condition()
        self.up = threading.Event()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._writer, args=(t,)) for t in range(WRITERS)]

    def start(self) -> None:
        self.up.set()
        for thread in self.threads:
            thread.start()

    def _writer(self, t: int) -> None:
        j = 0
        while not self.stop.is_set():
            self.up.wait()
            with self.deployment.http() as http:
                while not self.stop.is_set():
                    key = f"w{t}-j{j}"
                    value = f"{key}-{random.getrandbits(64):016x}"
                    j += 1
                    with self.cond:
                        self.sent[key] = value
                    try:
                        response = http.put(f"/v1/memories/agent/fault/{key}",
                                            json={"value": value})
                    except httpx.TransportError:
                        break  # the server is down: wait until it is back
                    with self.cond:
                        if response.status_code == 200:
                            self.acked.add(key)
                            self.cond.notify_all()
                        else:
                            self.refused.append((key, response.status_code, response.text))

    def wait_acked(self, count: int, timeout: float = 120) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.acked) >= count, timeout), \
                f"only {len(self.acked)} writes acknowledged"

    def finish(self) -> None:
        self.stop.set()
        self.up.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in self.threads)


def _memories_tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "memories" in p.relative_to(root).parts}


def _temporaries(root: Path) -> list[str]:
    tmp = root / TMP_DIR
    return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []


@pytest.mark.timeout(900)
def test_sigkill_during_concurrent_writes_loses_nothing(deployment: Deployment,
                                                        runtime: Runtime,
                                                        tmp_path: Path) -> None:
    server, root = deployment.server, deployment.bucket_root
    load = Load(deployment)
    load.start()
    kills = []
    rng = random.Random(17)
    moments = ["paused"] * PAUSED_KILLS + ["random"] * RANDOM_KILLS
    rng.shuffle(moments)
    try:
        for n, moment in enumerate(moments):
            if moment == "paused":
                # Restart with the pause point armed, then kill as soon as a write is
                # stopped between its object and its pointer.
                load.up.clear()
                server.kill()
                pause_file = tmp_path / f"pause-{n}"
                server.start(pause_at="write:after_put", pause_file=pause_file)
                load.up.set()
                wait_for_pause(pause_file, server.process)
            else:
                load.wait_acked(len(load.acked) + rng.randint(5, 40))
            load.up.clear()
            server.kill()
            kills.append(moment)
            server.start()
            load.up.set()
        load.wait_acked(MIN_ACKED)
    finally:
        load.finish()

    assert load.refused == []  # a restarted server answers writes, it does not refuse them

    with runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer)))
    by_key = {str(p.key): p for p in pointers}
    assert len(by_key) == len(pointers)
    # I2: every acknowledged write has its pointer; a pointer without acknowledgement is a
    # write that committed while its answer was lost to a kill, and holds what was sent.
    assert load.acked <= set(by_key), sorted(load.acked - set(by_key))[:10]
    assert set(by_key) <= set(load.sent)
    assert {p.sync_status for p in pointers} == {"synced"}
    assert {p.version for p in pointers} == {1}

    # I1, recomputed from the bucket and not from the server's GET: decrypt each object with
    # the envelope code, hash the plaintext, compare with the pointer and with what was sent.
    for key, pointer in by_key.items():
        blob = (root / pointer.storage_path).read_bytes()
        plaintext = open_stored(runtime, pointer.tenant_id, pointer.storage_path, pointer.id,
                                blob)
        expected = serialise(load.sent[key])
        assert hashlib.sha256(plaintext).hexdigest() == hashlib.sha256(expected).hexdigest(), key
        assert plaintext == expected, key
        assert pointer.content_sha256 == hashlib.sha256(expected).hexdigest(), key
        assert pointer.content_size == len(expected), key

    # The kills left orphans (objects stored, pointers never committed): reconcile reports
    # exactly those, and at least one per paused kill.
    named = {p.storage_path for p in pointers}
    orphans = _memories_tree(root) - named
    assert len(orphans) >= PAUSED_KILLS, (len(orphans), kills)
    with runtime.sessions() as session:
        settled = reconcile(session, runtime.plane, grace_seconds=0)
        collected = collect_orphans(session, runtime.plane, grace_seconds=0)
    assert settled.errors == [] and settled.corrupt == 0
    assert settled.writes_rolled_back == 0 and settled.deletes_completed == 0
    assert collected.orphans_deleted == len(orphans)
    assert collected.rescued == 0 and collected.waiting == 0

    # After reconcile + GC: the memories/ tree is the pointers' paths exactly, and no
    # temporary file of a killed put is left anywhere in the bucket directory (beside the
    # audit's own checkpoints).
    assert _memories_tree(root) == named
    assert _temporaries(root) == []
    leftovers = [path for p in root.rglob("*")
                 if p.is_file() and not p.name.endswith(".json")
                 and "/audit/checkpoints/tlog/" not in (path := p.relative_to(root).as_posix())]
    assert leftovers == []

    # And the server serves each acknowledged value (verified read, I3).
    with deployment.http() as http:
        for key in sorted(load.acked)[:: max(1, len(load.acked) // 50)]:
            response = http.get(f"/v1/memories/agent/fault/{key}")
            assert response.status_code == 200, (key, response.text)
            assert response.json()["value"] == load.sent[key]
    print(json.dumps({"kills": kills, "acknowledged": len(load.acked), "keys": len(pointers),
                      "orphans": len(orphans),
                      "temporaries_removed": getattr(collected, "temporaries_removed", None)}))


def test_reconcile_removes_temporaries_a_killed_put_left(deployment: Deployment,
                                                         runtime: Runtime,
                                                         tmp_path: Path) -> None:
    """A server killed inside ``put`` (after the temporary file, before the link) leaves
    that file in the bucket directory; GC with grace 0 removes it, and nothing else."""
    server, root = deployment.server, deployment.bucket_root
    with deployment.http() as http:
        assert http.put("/v1/memories/agent/fault/kept", json={"value": "v"}).status_code == 200
    server.kill()
    # What the killed put leaves: its sealed bytes under .memplane-tmp/, never linked.
    stale = root / TMP_DIR / "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    stale.write_bytes(b"sealed bytes of a put that never finished")
    with runtime.sessions() as session:
        collected = collect_orphans(session, runtime.plane, grace_seconds=0)
    assert _temporaries(root) == []
    assert collected.temporaries_removed == 1
    assert collected.orphans_deleted == 0
    server.start()
    with deployment.http() as http:
        assert http.get("/v1/memories/agent/fault/kept").json()["value"] == "v"
