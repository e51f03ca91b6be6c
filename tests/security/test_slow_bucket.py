"""A tenant whose bucket stops answering costs other tenants nothing (DESIGN §12).

Tenant A's bucket is moto behind a forwarding server that, once A's memories are written,
holds every GET open; A then fires more reads at once than the server has request threads.
Each tenant's calls to its own buckets are bounded by a bulkhead
(control_plane/plane/bulkhead.py): two run, two more may wait, the rest are refused
at once with 503 ``storage_busy``. Meanwhile tenant B, on a healthy bucket of its own, reads
as usual and the probes answer — all while A's two reads are still held in its bucket.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from control_plane.settings import REQUEST_THREADS
from tests.security.http_servers import Recorder, bucket_through
from tests.support.emulators import MOTO_KEY_ID, MOTO_REGION, MOTO_SECRET, MotoServer
from tests.support.service import ServerThread, Stack, Tenant, make_settings

CALLS, WAITERS = 2, 2
READS = REQUEST_THREADS + 10  # more than the server has threads: without a bound, A has them all
BUSY = ("too many of this tenant's storage calls are waiting on its bucket (at most 2 at once "
        "and 2 waiting, per server process): the bucket is slow or not answering; retry "
        "later, with fewer requests at once")


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    settings = make_settings("sqlite", tmp_path_factory.mktemp("bulkhead"),
                             storage_calls_per_tenant=CALLS,
                             storage_waiters_per_tenant=WAITERS, storage_wait_seconds=0.5,
                             # nothing but the test's own requests touches the buckets
                             run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


def _own_bucket(tenant: Tenant, moto: MotoServer, endpoint: str) -> None:
    bucket_through(tenant, moto, endpoint)
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/memories/tenant/-/note",
                        json={"value": {"of": str(tenant.id)}}).status_code == 200


def _refused(metrics: str) -> float:
    found = re.search(r'^memplane_storage_refused_total\{backend="s3"\} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_hanging_bucket_holds_only_its_tenants_bulkhead(bounded: Stack,
                                                          moto_server: MotoServer) -> None:
    a, b = bounded.new_tenant(), bounded.new_tenant()
    with Recorder(forward_to=moto_server.endpoint) as trap, \
            ThreadPoolExecutor(READS) as pool, httpx.Client(base_url=bounded.base_url,
                                                            timeout=60) as http:
        _own_bucket(a, moto_server, trap.url)
        _own_bucket(b, moto_server, moto_server.endpoint)
        before = _refused(http.get("/metrics").text)
        trap.mode = "hold"

        def read_a() -> httpx.Response:
            with bounded.http(a.admin_key) as mine:
                return mine.get("/v1/memories/tenant/-/note")

        try:
            reads: list[Future[httpx.Response]] = [pool.submit(read_a)
                                                   for _ in range(READS)]
            # all but the two in A's bucket are answered while those two are still held
            deadline = time.monotonic() + 60  # a guard against hanging, not a measurement
            while sum(f.done() for f in reads) < READS - CALLS:
                assert time.monotonic() < deadline, "A's excess reads were not refused"
                time.sleep(0.05)
            done = [f for f in reads if f.done()]
            bulkhead = bounded.runtime.plane.bulkheads.of(a.id)
            assert (bulkhead.running, bulkhead.waiting) == (CALLS, 0)
            assert trap.held  # (a timed-out GET retried by the client may add one)
            refusals = [f.result() for f in done]
            assert {(r.status_code, r.headers["Retry-After"]) for r in refusals} == {(503, "2")}
            assert {r.json()["problem"] for r in refusals} == {"storage_busy"}
            assert refusals[0].json() == {"error": "storage_unavailable", "detail": BUSY,
                                          "problem": "storage_busy"}

            # B reads from its own bucket, and the probes answer, while A's reads hang
            with bounded.http(b.admin_key) as theirs:
                other = [theirs.get("/v1/memories/tenant/-/note") for _ in range(5)]
            probes = [http.get("/healthz"), http.get("/readyz")]
            metrics = http.get("/metrics").text
            assert (bulkhead.running, len(done)) == (CALLS, READS - CALLS)
            assert not any(f.done() for f in reads if f not in done)
        finally:
            trap.release.set()
        assert [(r.status_code, r.json().get("value")) for r in other] == [
            (200, {"of": str(b.id)})] * 5
        assert [(p.status_code, p.json()["status"]) for p in probes] == [
            (200, "ok"), (200, "ready")]
        assert _refused(metrics) - before == READS - CALLS
        # once the bucket answers again, the two held reads are served
        finished: list[Any] = [f.result(timeout=60) for f in reads if f not in done]
        assert [(r.status_code, r.json().get("value")) for r in finished] == [
            (200, {"of": str(a.id)})] * CALLS


def test_the_probes_answer_while_every_request_thread_waits_on_a_bucket(
        moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The operator's default bucket has no bulkhead (it is the operator's, and every tenant
    on it shares it anyway): when it hangs, reads take every request thread — and still
    ``/healthz`` and ``/readyz`` answer, from threads of their own."""
    bucket = f"default-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    with Recorder(forward_to=moto_server.endpoint) as trap, ThreadPoolExecutor(READS) as pool:
        url = (f"s3://{bucket}?endpoint_url={trap.url}&region={MOTO_REGION}"
               f"&access_key_id={MOTO_KEY_ID}&secret_access_key={MOTO_SECRET}")
        settings = make_settings("sqlite", tmp_path_factory.mktemp("hanging-default"),
                                 default_bucket_url=url, run_background=False)
        server = ServerThread(settings).start()
        stack = Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
        try:
            tenant = stack.new_tenant()
            with stack.http(tenant.admin_key) as http:
                assert http.put("/v1/memories/tenant/-/note",
                                json={"value": 1}).status_code == 200
            trap.mode = "hold"

            def read() -> int:
                with stack.http(tenant.admin_key) as mine:
                    return mine.get("/v1/memories/tenant/-/note").status_code

            try:
                reads = [pool.submit(read) for _ in range(READS)]
                deadline = time.monotonic() + 60  # a guard against hanging, not a measurement
                while len(trap.held) < REQUEST_THREADS:
                    assert time.monotonic() < deadline, f"only {len(trap.held)} reads held"
                    time.sleep(0.05)
                with httpx.Client(base_url=stack.base_url, timeout=20) as http:
                    probes = [http.get("/healthz"), http.get("/readyz")]
                assert len(trap.held) >= REQUEST_THREADS  # every request thread still waits
            finally:
                trap.release.set()
            assert [(p.status_code, p.json()["status"]) for p in probes] == [
                (200, "ok"), (200, "ready")]
            assert [f.result(timeout=60) for f in reads] == [200] * READS
        finally:
            server.stop()
