"""Backends going away under load: requests fail cleanly with 503, nothing is half-written,
and the service recovers by itself when the backend returns. After each outage
``memplane reconcile --grace-seconds 0`` settles what the outage left, and then the bucket
holds exactly the objects the pointers name: under ``memories/`` nothing more (no orphan of
a failed put, no temporary file) and nothing less; outside it only the audit chain's signed
checkpoints (these tests start no export).

The phases of the load follow what the load has seen (so many answers before the cut, so
many refusals during it, an answer from every writer after it), never a fixed sleep."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from storage_adapters.registry import from_url
from tests.support.emulators import MotoServer, new_s3_bucket
from tests.support.postgres import PostgresCluster
from tests.support.process import MEMPLANE, ServerProcess, TcpProxy

from .conftest import ADMIN_KEY, make_env

pytestmark = pytest.mark.slow

THREADS = 6
CHECKPOINT = re.compile(r"tenants/[0-9a-f-]{36}/audit/checkpoints/([0-9]{20}(-moved)?\.json"
                        r"|tlog/checkpoint/[0-9]{20}|tlog/consistency/[0-9]{20}-[0-9]{20})")


def _load(base_url: str, stop: threading.Event, outcomes: list[tuple[str, int, str]],
          lock: threading.Lock, tag: str) -> None:
    with httpx.Client(base_url=base_url, timeout=15,
                      headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        n = 0
        while not stop.is_set():
            key = f"{tag}-{n}"
            n += 1
            try:
                response = http.put(f"/v1/memories/user/load/{key}", json={"value": key})
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            with lock:
                outcomes.append((key, response.status_code, response.text))


def _run_load(base_url: str, threads: int = THREADS
              ) -> tuple[threading.Event, list[tuple[str, int, str]], list[threading.Thread],
                         threading.Lock]:
    stop, lock = threading.Event(), threading.Lock()
    outcomes: list[tuple[str, int, str]] = []
    workers = [threading.Thread(target=_load, args=(base_url, stop, outcomes, lock, f"t{i}"))
               for i in range(threads)]
    for worker in workers:
        worker.start()
    return stop, outcomes, workers, lock


def _all_pointers(http: httpx.Client) -> list[dict[str, object]]:
    items, cursor = [], None
    while True:
        page = http.get("/v1/pointers", params={"limit": 1000, **({"cursor": cursor} if cursor
                                                                   else {})}).json()
        items += page["items"]
        if (cursor := page["next_cursor"]) is None:
            return items


def _wait_until(what: str, condition: Callable[[], bool], timeout: float = 120) -> None:
    """Poll a condition on what the load has seen so far (the test's phases follow the load,
    not the clock); the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def _count(outcomes: list[tuple[str, int, str]], lock: threading.Lock, status: int,
           since: int = 0) -> int:
    with lock:
        return sum(1 for _, code, _ in outcomes[since:] if code == status)


def _writers_answered(outcomes: list[tuple[str, int, str]], lock: threading.Lock,
                      status: int, since: int) -> set[str]:
    """The load threads (by key prefix) that got ``status`` after position ``since``."""
    with lock:
        return {key.split("-")[0] for key, code, _ in outcomes[since:] if code == status}


def _reconcile(server: ServerProcess) -> dict[str, int]:
    """``memplane reconcile --grace-seconds 0`` on the server's own settings; its report."""
    done = subprocess.run([str(MEMPLANE), "reconcile", "--grace-seconds", "0"],
                          env=server.env, capture_output=True, text=True, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = re.findall(r"^\W*([a-z][a-z ()]+?)\s*\W\s*(\d+)\s*\W*$",
                      done.stdout + done.stderr, re.MULTILINE)
    report = {what: int(count) for what, count in rows}
    assert len(report) == 11, done.stdout + done.stderr
    return report


def _assert_settled(report: dict[str, int]) -> None:
    """Nothing pending, nothing corrupt, and every orphan it found deleted in this run."""
    assert report["corrupt pointers"] == 0
    assert report["pending writes rolled back"] == report["pending deletes completed"] == 0
    assert report["orphan objects deleted"] == report["orphan candidates marked"]
    assert report["candidates in their grace period"] == 0
    assert report["young objects kept (grace)"] == 0


def _assert_bucket_exact(objects: list[str], pointers: list[dict[str, object]]) -> None:
    """Under ``memories/``: exactly the pointers' paths. Anything else: an audit checkpoint
    (the chain's, or the Merkle tree's signed note and its consistency proof)."""
    content = sorted(p for p in objects if "/memories/" in p)
    assert content == sorted(str(p["storage_path"]) for p in pointers)
    others = [p for p in objects if "/memories/" not in p]
    assert [p for p in others if not CHECKPOINT.fullmatch(p)] == []


@pytest.fixture
def s3_behind_proxy(moto_server: MotoServer) -> Iterator[tuple[TcpProxy, str]]:
    config = new_s3_bucket(moto_server)
    proxy = TcpProxy(moto_server.port)
    query = {k: v for k, v in config.items() if k not in ("bucket", "endpoint_url")}
    query |= {"endpoint_url": proxy.endpoint, "connect_timeout": 1, "read_timeout": 3,
              "max_attempts": 1}
    try:
        yield proxy, f"s3://{config['bucket']}?{urlencode(query)}"
    finally:
        proxy.cut()


@pytest.mark.timeout(300)
def test_object_store_outage_gives_503_and_recovers(postgres: PostgresCluster, tmp_path: Path,
                                                    s3_behind_proxy: tuple[TcpProxy, str]
                                                    ) -> None:
    proxy, bucket_url = s3_behind_proxy
    server = ServerProcess(make_env(postgres.create_database(), tmp_path, bucket_url)).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=15,
                          headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            before = http.put("/v1/memories/user/probe/before", json={"value": 0})
        stop, outcomes, workers, lock = _run_load(server.base_url)
        _wait_until("the load has 30 writes acknowledged",
                    lambda: _count(outcomes, lock, 200) >= 30)
        proxy.cut()
        with lock:
            cut_at = len(outcomes)
        _wait_until("the load has 12 writes refused with 503 during the outage",
                    lambda: _count(outcomes, lock, 503, cut_at) >= 2 * THREADS)
        with httpx.Client(base_url=server.base_url, timeout=15,
                          headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            during = http.put("/v1/memories/user/probe/during", json={"value": 1})
            read_during = http.get("/v1/memories/user/probe/before")
            ready_during = http.get("/readyz")
        proxy.restore()
        with lock:
            restored_at = len(outcomes)
        _wait_until("every load thread has a write acknowledged after the outage",
                    lambda: len(_writers_answered(outcomes, lock, 200, restored_at)) == THREADS)
        stop.set()
        for worker in workers:
            worker.join(timeout=30)
        reconciled = _reconcile(server)
        with httpx.Client(base_url=server.base_url, timeout=15,
                          headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
            after = http.put("/v1/memories/user/probe/after", json={"value": 2})
            pointers = _all_pointers(http)
            reads = [http.get(f"/v1/memories/user/load/{p['key']}") for p in pointers
                     if p["scope_ref"] == "load"]
        objects = [info.path for info in from_url(bucket_url).list("")]
    finally:
        server.stop()

    statuses = {status for _, status, _ in outcomes}
    assert statuses == {200, 503}, statuses
    unavailable = [text for _, status, text in outcomes if status == 503]
    assert all('"storage_unavailable"' in text for text in unavailable)
    assert during.status_code == 503 and during.headers["Retry-After"].isdigit()
    assert during.json()["error"] == "storage_unavailable"
    assert before.status_code == 200
    assert read_during.status_code == 503
    assert ready_during.status_code == 200  # the database is fine; only the bucket is away
    assert after.status_code == 200
    acknowledged = {key for key, status, _ in outcomes if status == 200}
    assert {p["key"] for p in pointers if p["scope_ref"] == "load"} == acknowledged
    assert {p["key"] for p in pointers if p["scope_ref"] == "probe"} == {"before", "after"}
    assert {p["sync_status"] for p in pointers} == {"synced"}
    assert all(r.status_code == 200 for r in reads)
    _assert_settled(reconciled)
    # After reconcile (grace 0) the orphans of puts cut mid-way are gone: the bucket's
    # memories/ tree is exactly the pointers' paths ("after" was written after reconcile
    # and is a pointer like the others).
    _assert_bucket_exact(objects, pointers)


@pytest.mark.timeout(300)
def test_database_outage_fails_cleanly_and_recovers(tmp_path: Path) -> None:
    # Its own durable server: stopping it harms no other test, and a crash keeps commits.
    cluster = PostgresCluster(durable=True).start()
    try:
        server = ServerProcess(make_env(cluster.create_database(), tmp_path)).start()
        try:
            stop, outcomes, workers, lock = _run_load(server.base_url)
            _wait_until("the load has 30 writes acknowledged",
                        lambda: _count(outcomes, lock, 200) >= 30)
            cluster.halt()
            with lock:
                halted_at = len(outcomes)
            _wait_until("the load has 3 writes refused with 503 during the outage",
                        lambda: _count(outcomes, lock, 503, halted_at) >= 3)
            with httpx.Client(base_url=server.base_url, timeout=15,
                              headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
                ready_down = http.get("/readyz")
                write_down = http.put("/v1/memories/user/probe/down", json={"value": 1})
            cluster.resume()
            with lock:
                resumed_at = len(outcomes)
            _wait_until("every load thread has a write acknowledged after the outage",
                        lambda: len(_writers_answered(outcomes, lock, 200, resumed_at))
                        == THREADS)
            stop.set()
            for worker in workers:
                worker.join(timeout=30)
            reconciled = _reconcile(server)
            with httpx.Client(base_url=server.base_url, timeout=15,
                              headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
                ready_up = http.get("/readyz")
                after = http.put("/v1/memories/user/probe/after", json={"value": 2})
                pointers = _all_pointers(http)
                reads = {p["key"]: http.get(f"/v1/memories/user/load/{p['key']}")
                         for p in pointers if p["scope_ref"] == "load"}
            bucket = tmp_path / "bucket"
            objects = [f.relative_to(bucket).as_posix() for f in bucket.rglob("*")
                       if f.is_file()]
        finally:
            server.stop()
    finally:
        cluster.stop()

    statuses = {status for _, status, _ in outcomes}
    assert statuses == {200, 503}, statuses
    assert ready_down.status_code == 503
    assert write_down.status_code == 503
    assert write_down.json()["error"] in ("database_unavailable", "storage_unavailable")
    assert ready_up.status_code == 200 and after.status_code == 200
    acknowledged = {key for key, status, _ in outcomes if status == 200}
    refused = {key for key, status, _ in outcomes if status == 503}
    stored = {p["key"] for p in pointers if p["scope_ref"] == "load"}
    # every acknowledged write is there; a write refused with 503 whose commit reached the
    # database before the connection broke may be there too, nothing else
    assert acknowledged <= stored
    assert stored - acknowledged <= refused
    assert {"after"} <= {p["key"] for p in pointers if p["scope_ref"] == "probe"} \
        <= {"down", "after"}
    assert {p["sync_status"] for p in pointers} == {"synced"}
    assert all(r.status_code == 200 for r in reads.values())
    _assert_settled(reconciled)
    # the database outage left objects whose commit never happened: reconcile (grace 0)
    # removed them; the bucket (every file in it, temporary files included) is exact
    _assert_bucket_exact(objects, pointers)
