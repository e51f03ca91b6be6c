"""Several tenants whose buckets hang together cost a healthy tenant nothing (DESIGN §12).

Three hostile tenants' buckets are moto behind forwarding servers that, once everything is
written and indexed, hold every GET open. The three first search with values (the value
reads go to the search pool shared by all tenants: together they fill it), then fire many
reads each — three tenants' calls + waiters outnumber the server's request threads. Each
tenant's work takes at most half of a shared pool, and the process's budget of threads in
tenants' buckets (plane/budget.py) lets the three together hold only its shared
part: everything else is refused at once with 503 ``storage_busy``. Meanwhile a fourth
tenant's reads, searches and batch sets succeed, and the probes answer — all while the
hostile calls are still held in their buckets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack

import httpx
import pytest

from control_plane.plane.budget import LIGHT
from control_plane.search import indexer
from tests.security.http_servers import Recorder, bucket_through
from tests.support.emulators import MotoServer
from tests.support.service import ServerThread, Stack, Tenant, make_settings

HOSTILE, READS, VALUES = 3, 20, 6
THREADS, RESERVED = 24, 8
SEARCH_WORKERS, SEARCH_SHARE = 8, 4
CROWDED = ("too many storage calls of this server are waiting on slow buckets (at most 24 in "
           "all tenants' buckets per server process, the last 8 kept for tenants with fewer "
           "than 2 in theirs), and this tenant already has calls under way: retry later, with "
           "fewer requests at once")
BUSY = ("too many of this tenant's storage calls are waiting on its bucket (at most 8 at once "
        "and 8 waiting, per server process): the bucket is slow or not answering; retry "
        "later, with fewer requests at once")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    settings = make_settings("sqlite", tmp_path_factory.mktemp("together"),
                             storage_calls_per_tenant=8, storage_waiters_per_tenant=8,
                             storage_wait_seconds=0.5, storage_threads=THREADS,
                             storage_threads_reserved=RESERVED,
                             # held calls stay held until the test lets them go
                             storage_call_deadline_seconds=120, run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


def _own_bucket(tenant: Tenant, moto: MotoServer, endpoint: str) -> None:
    bucket_through(tenant, moto, endpoint)
    with tenant.stack.http(tenant.admin_key) as http:
        for n in range(VALUES):
            assert http.put(f"/v1/memories/user/u1/note{n}",
                            json={"value": f"a note about the garden, number {n}"}
                            ).status_code == 200


def _until(what: Callable[[], str], condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # a guard against hanging, not a measurement
    while not condition():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


def _search(http: httpx.Client, **body: object) -> httpx.Response:
    return http.post("/v1/search", json={"query": "garden note", "scope": "user",
                                         "scope_ref": "u1", "limit": VALUES} | body)


def test_three_hanging_buckets_leave_a_fourth_tenant_its_reads_searches_and_batches(
        stack: Stack, moto_server: MotoServer) -> None:
    runtime = stack.runtime
    hostile = [stack.new_tenant() for _ in range(HOSTILE)]
    healthy = stack.new_tenant()
    with ExitStack() as cleanup:
        traps = [cleanup.enter_context(Recorder(forward_to=moto_server.endpoint))
                 for _ in hostile]
        pool = cleanup.enter_context(ThreadPoolExecutor(HOSTILE * (READS + 1)))
        for tenant, trap in zip(hostile, traps, strict=True):
            _own_bucket(tenant, moto_server, trap.url)
        _own_bucket(healthy, moto_server, moto_server.endpoint)
        with runtime.sessions() as session:
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        for tenant in hostile:  # segments loaded; values not yet read
            with stack.http(tenant.admin_key) as http:
                assert len(_search(http, include_values=False).json()["results"]) == VALUES
        for trap in traps:
            trap.mode = "hold"
        budget = runtime.plane.bulkheads.budget
        search_pool = runtime.search_cache.pool()
        bulkheads = [runtime.plane.bulkheads.of(t.id) for t in hostile]

        def held() -> int:
            return sum(len(trap.held) for trap in traps)

        def as_tenant(tenant: Tenant, call: Callable[[httpx.Client], httpx.Response]
                      ) -> Callable[[], httpx.Response]:
            def run() -> httpx.Response:
                with stack.http(tenant.admin_key) as http:
                    return call(http)
            return run

        try:
            # each hostile search reads its values on the search pool: at most half of it
            # per tenant, the rest in the request's own thread
            searches = [pool.submit(as_tenant(t, lambda h: _search(h, include_values=True)))
                        for t in hostile]
            # two tenants' four each fill the pool; every search holds one more call itself
            _until(lambda: f"the hostile searches did not fill the search pool: {held()} "
                   f"held, {search_pool.busy} busy",
                   lambda: held() == SEARCH_WORKERS + HOSTILE)
            assert search_pool.busy == SEARCH_WORKERS
            # which tenant's tasks reach a worker first is a race; none gets more than its share
            running = [search_pool.running(t.id) for t in hostile]
            assert sum(running) == SEARCH_WORKERS and max(running) <= SEARCH_SHARE, running
            after_searches = held()

            reads: list[Future[httpx.Response]] = [
                pool.submit(as_tenant(t, lambda h: h.get("/v1/memories/user/u1/note0")))
                for t in hostile for _ in range(READS)]
            # every read is answered, or held in its bucket
            _until(lambda: f"the hostile reads were neither refused nor held: {held()}",
                   lambda: (
                sum(b.waiting for b in bulkheads) == 0
                and sum(f.done() for f in reads) + held() - after_searches == len(reads)))
            stuck = held()
            done = [f for f in reads if f.done()]
            # the three together hold at most the shared part, and from the reserve at most
            # what a light tenant may take. How much of the shared part they end up holding is
            # a race: a read waiting for its tenant's slot counts against the budget until it
            # gives up, so others' reads may be refused meanwhile and leave it short of full.
            assert budget.total == stuck == sum(b.running for b in bulkheads)
            assert after_searches <= stuck <= THREADS - RESERVED + HOSTILE * (LIGHT - 1)
            refusals = [f.result() for f in done]
            assert {(r.status_code, r.headers["Retry-After"], r.json()["problem"])
                    for r in refusals} == {(503, "2", "storage_busy")}
            details = {r.json()["detail"] for r in refusals}
            assert CROWDED in details and details <= {CROWDED, BUSY}

            # the healthy tenant meanwhile: reads, a search with values, a batch of sets
            with stack.http(healthy.admin_key) as http:
                own = [http.get(f"/v1/memories/user/u1/note{n}") for n in range(VALUES)]
                found = _search(http, include_values=True)
                batch = http.post("/v1/memories:batch", json={"operations": [
                    {"op": "set", "scope": "user", "scope_ref": "u2", "key": f"k{n}",
                     "value": n} for n in range(12)]})
                again = http.get("/v1/memories/user/u2/k11")
            with httpx.Client(base_url=stack.base_url, timeout=20) as http:
                probes = [http.get("/healthz"), http.get("/readyz")]
            # all of it while every hostile call is still held
            assert held() == stuck and budget.total == stuck
            assert not any(f.done() for f in searches)
        finally:
            for trap in traps:
                trap.release.set()

        assert [(r.status_code, r.json()["value"]) for r in own] == [
            (200, f"a note about the garden, number {n}") for n in range(VALUES)]
        assert found.status_code == 200, found.text
        assert sorted(r["value"] for r in found.json()["results"]) == [
            f"a note about the garden, number {n}" for n in range(VALUES)]
        assert batch.status_code == 200, batch.text
        assert [(r["index"], r["status"]) for r in batch.json()["results"]] == [
            (n, 200) for n in range(12)]
        assert (again.status_code, again.json()["value"]) == (200, 11)
        assert [(p.status_code, p.json()["status"]) for p in probes] == [
            (200, "ok"), (200, "ready")]
        # once the buckets answer, what they held is served
        assert {f.result(timeout=60).status_code for f in reads if f not in done} == {200}
        # A search still had values to read when its held calls came back; one that asked
        # while the released reads still held the shared budget was refused at once, as the
        # budget refuses (503 storage_busy, retry): asked again, it answers in full.
        answers = [f.result(timeout=60) for f in searches]
        assert {(a.status_code, a.status_code == 200 or a.json()["problem"]) for a in answers
                } <= {(200, True), (503, "storage_busy")}
        for tenant, answer in zip(hostile, answers, strict=True):
            if answer.status_code == 503:
                with stack.http(tenant.admin_key) as http:
                    answer = _search(http, include_values=True)
            assert answer.status_code == 200, answer.text
            assert sorted(r["value"] for r in answer.json()["results"]) == [
                f"a note about the garden, number {n}" for n in range(VALUES)]
    assert (budget.total, search_pool.busy) == (0, 0)
