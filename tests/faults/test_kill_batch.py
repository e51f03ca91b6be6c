"""SIGKILL the server again and again while writers send batches: no acknowledged item is
lost (I2), no synced pointer lacks its object or names another value (I1), and reconcile +
GC leave the bucket exact (the model: test_kill_server.py).

Each writer sends ``POST /v1/memories:batch`` with :data:`BATCH` sets of unique keys; an
item counts as acknowledged when its batch answered 200 and the item's own status is 200.
Half the kills land with every write in flight paused between its object and its pointer
(``write:after_put``, control_plane/testhooks.py), the other half after a random number of
acknowledged items.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer
from control_plane.identity import Caller
from control_plane.integrity.reconcile import collect_orphans, reconcile
from control_plane.memories import service as memories
from control_plane.memories.api import serialise
from control_plane.memories.batch import run_batch
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from tests.support.crypto import open_stored
from tests.support.process import wait_for_pause
from tests.support.service import ServiceWorld, SimulatedCrash

from .conftest import Deployment

pytestmark = pytest.mark.slow

WRITERS = 4
BATCH = 25
PAUSED_KILLS = 3
RANDOM_KILLS = 3
MIN_ACKED = 600


@pytest.fixture
def deployment(any_deployment: Deployment) -> Deployment:
    """PostgreSQL and the embedded default's SQLite (tests/faults/conftest.py)."""
    return any_deployment


@pytest.fixture
def runtime(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    for name, value in deployment.env.items():
        monkeypatch.setenv(name, value)
    rt = Runtime(Settings())
    try:
        yield rt
    finally:
        rt.close()


class BatchLoad:
    """Writers sending batches of unique keys; the test knows every value it ever sent."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.sent: dict[str, str] = {}
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
        b = 0
        while not self.stop.is_set():
            self.up.wait()
            with self.deployment.http() as http:
                while not self.stop.is_set():
                    keys = [f"w{t}-b{b}-i{i}" for i in range(BATCH)]
                    b += 1
                    values = {k: f"{k}-{random.getrandbits(64):016x}" for k in keys}
                    with self.cond:
                        self.sent.update(values)
                    try:
                        response = http.post("/v1/memories:batch", json={"operations": [
                            {"op": "set", "scope": "agent", "scope_ref": "fault", "key": k,
                             "value": v} for k, v in values.items()]})
                    except httpx.TransportError:
                        break  # the server is down: wait until it is back
                    with self.cond:
                        if response.status_code != 200:
                            self.refused.append(("batch", response.status_code, response.text))
                            continue
                        for result in response.json()["results"]:
                            if result["status"] == 200:
                                self.acked.add(keys[result["index"]])
                            else:
                                self.refused.append((keys[result["index"]], result["status"],
                                                     result.get("error", "")))
                        self.cond.notify_all()

    def wait_acked(self, count: int, timeout: float = 180) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.acked) >= count, timeout), \
                f"only {len(self.acked)} items acknowledged"

    def finish(self) -> None:
        self.stop.set()
        self.up.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in self.threads)


def _memories_tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "memories" in p.relative_to(root).parts}


@pytest.mark.timeout(900)
def test_sigkill_during_batches_loses_no_acknowledged_item(deployment: Deployment,
                                                           runtime: Runtime,
                                                           tmp_path: Path) -> None:
    server, root = deployment.server, deployment.bucket_root
    load = BatchLoad(deployment)
    load.start()
    kills = []
    rng = random.Random(23)
    moments = ["paused"] * PAUSED_KILLS + ["random"] * RANDOM_KILLS
    rng.shuffle(moments)
    try:
        for n, moment in enumerate(moments):
            if moment == "paused":
                load.up.clear()
                server.kill()
                pause_file = tmp_path / f"pause-{n}"
                server.start(pause_at="write:after_put", pause_file=pause_file)
                load.up.set()
                wait_for_pause(pause_file, server.process)
            else:
                load.wait_acked(len(load.acked) + rng.randint(BATCH, 4 * BATCH))
            load.up.clear()
            server.kill()
            kills.append(moment)
            server.start()
            load.up.set()
        load.wait_acked(MIN_ACKED)
    finally:
        load.finish()

    assert load.refused == []

    with runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer)))
    by_key = {str(p.key): p for p in pointers}
    assert len(by_key) == len(pointers)
    # I2: every acknowledged item has its pointer; an unacknowledged pointer is an item whose
    # commit landed while its batch's answer was lost to a kill, and holds what was sent.
    assert load.acked <= set(by_key), sorted(load.acked - set(by_key))[:10]
    assert set(by_key) <= set(load.sent)
    assert {p.sync_status for p in pointers} == {"synced"}
    assert {p.version for p in pointers} == {1}

    # I1, from the bucket itself: decrypt, hash, compare with the pointer and what was sent.
    for key, pointer in by_key.items():
        blob = (root / pointer.storage_path).read_bytes()
        plaintext = open_stored(runtime, pointer.tenant_id, pointer.storage_path, pointer.id,
                                blob)
        expected = serialise(load.sent[key])
        assert plaintext == expected, key
        assert pointer.content_sha256 == hashlib.sha256(expected).hexdigest(), key

    named = {p.storage_path for p in pointers}
    orphans = _memories_tree(root) - named
    assert len(orphans) >= PAUSED_KILLS, (len(orphans), kills)
    with runtime.sessions() as session:
        settled = reconcile(session, runtime.plane, grace_seconds=0)
        collected = collect_orphans(session, runtime.plane, grace_seconds=0)
    assert settled.errors == [] and settled.corrupt == 0
    assert collected.orphans_deleted == len(orphans)
    assert collected.rescued == 0
    assert _memories_tree(root) == named

    # The restarted server serves acknowledged items through a batch read (verified, I3).
    sample = sorted(load.acked)[:: max(1, len(load.acked) // 100)]
    with deployment.http() as http:
        response = http.post("/v1/memories:batch", json={"operations": [
            {"op": "get", "scope": "agent", "scope_ref": "fault", "key": k} for k in sample]})
    assert [(r["status"], r["value"]) for r in response.json()["results"]] == [
        (200, load.sent[k]) for k in sample]
    print(json.dumps({"kills": kills, "acknowledged": len(load.acked), "keys": len(pointers),
                      "orphans": len(orphans)}))


def _objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list(target.path("memories") + "/")}


def test_a_batch_killed_before_its_one_commit_leaves_only_orphans(world: ServiceWorld) -> None:
    """The process dies after every object of the batch is stored and before the one
    transaction of its pointer rows: no pointer names any of them (I1), GC removes them all,
    and the batch sent again lands whole."""
    runtime = world.runtime
    caller = Caller(world.tenant_id, uuid.uuid4(), "admin", False)
    with runtime.sessions() as session:  # the scope's subject key exists: the batched path
        memories.set_value(session, runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.agent, "bot", "warm"), 0, MemoryMeta())
    ops = [{"op": "set", "scope": "agent", "scope_ref": "bot", "key": f"k{i}", "value": i}
           for i in range(20)]
    world.crash_at = "write:before_commit"
    with runtime.sessions() as session, pytest.raises(SimulatedCrash):
        run_batch(runtime.sessions, session, runtime.plane, caller, ops, None)

    with runtime.sessions() as session:
        keys = session.scalars(select(MemoryPointer.key).where(
            MemoryPointer.tenant_id == world.tenant_id)).all()
        assert keys == ["warm"]
        assert len(_objects(world)) == 21
        collected = collect_orphans(session, runtime.plane, grace_seconds=0,
                                    tenant_id=world.tenant_id)
    assert collected.orphans_deleted == 20
    assert len(_objects(world)) == 1

    with runtime.sessions() as session:
        answer = run_batch(runtime.sessions, session, runtime.plane, caller, ops, None)
    assert [(r["index"], r["status"]) for r in answer.results] == [(i, 200) for i in range(20)]
    with runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key != "warm")))
        target = runtime.plane.active(session, world.tenant_id)
    assert len(pointers) == 20
    assert len(_objects(world)) == 21
    for pointer in pointers:
        blob = target.adapter.get(pointer.storage_path)
        plain = open_stored(runtime, world.tenant_id, pointer.storage_path, pointer.id, blob)
        assert plain == serialise(int(str(pointer.key)[1:]))
        assert pointer.content_sha256 == hashlib.sha256(plain).hexdigest()
