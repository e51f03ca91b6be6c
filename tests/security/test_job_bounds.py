"""One tenant's jobs cost other tenants a bounded delay: a quota of queued jobs per tenant and
kind (429 past it), a limit of running jobs per tenant, and a time bound per job step (an
attempt whose step hangs is abandoned and stops renewing its lease).

Real parts: PostgreSQL or SQLite, moto behind a local proxy that turns into a bucket that
trickles its answer one byte a second (the slow bucket of the report), a real worker.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from sqlalchemy import func, select, update

from control_plane.compliance import service as compliance
from control_plane.db.engine import begin_write
from control_plane.db.models import Job
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from control_plane.jobs.limits import TooManyJobs
from control_plane.jobs.service import JobContext, LeaseLost
from control_plane.retention import schedule
from control_plane.retention.schemas import RetentionRunIn
from control_plane.runtime import Runtime
from control_plane.storage_config import service as storage
from control_plane.storage_config.schemas import S3ConfigIn
from control_plane.tenants.service import create_tenant
from tests.support.clock import DEADLINE_SECONDS, wait_until
from tests.support.emulators import MotoServer
from tests.support.jobs import close_runnable_jobs
from tests.support.local_http import LocalHTTPServer, answer, forward
from tests.support.service import ServerThread, Stack, isolated_database, make_settings

QUOTA, CONCURRENCY = 3, 2
STEP, LEASE = 2.0, 1.5  # seconds: the step bound, and a lease renewed every 0.5 s
STEP_TIMEOUT = ("StepTimeout: a step ran longer than 2 s without progress "
                "(MEMPLANE_JOB_STEP_SECONDS); the attempt was abandoned")


@pytest.fixture(scope="module")
def runtime(database: str, request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """A database of its own with no server worker on it: the tests run their own."""
    url = isolated_database(database, request)
    built = Runtime(make_settings(
        url, tmp_path_factory.mktemp("bounds"), job_tenant_quota=QUOTA,
        job_tenant_concurrency=CONCURRENCY, job_step_seconds=STEP, job_lease_seconds=LEASE))
    if url == "sqlite":
        built.migrate()
    try:
        yield built
    finally:
        built.close()


@pytest.fixture(autouse=True)
def nothing_left_runnable(runtime: Runtime) -> Iterator[None]:
    close_runnable_jobs(runtime)
    yield
    close_runnable_jobs(runtime)


def _tenant(runtime: Runtime, name: str) -> Actor:
    with runtime.sessions() as session:
        created, _ = create_tenant(session, f"{name}-{uuid.uuid4().hex[:8]}")
    return Actor(created.id, "api", "officer")


def _job(runtime: Runtime, job_id: uuid.UUID) -> Job:
    with runtime.sessions() as session:
        found = session.get(Job, job_id)
        assert found is not None
        return found


# -- the quota ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def quiet(database: str, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server without a job worker (its jobs stay queued), with a quota of 3."""
    url = isolated_database(database, request)
    settings = make_settings(url, tmp_path_factory.mktemp("quota"), run_jobs=False,
                             job_tenant_quota=QUOTA)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


def test_the_job_after_the_quota_answers_429_and_other_kinds_and_tenants_go_on(
        quiet: Stack) -> None:
    tenant, other = quiet.new_tenant(), quiet.new_tenant()
    with quiet.http(tenant.admin_key) as http:
        accepted = [http.post(f"/v1/subjects/user-{i}/export") for i in range(QUOTA)]
        refused = http.post("/v1/subjects/user-x/export")
        erasure = http.post("/v1/subjects/user-y/erase")
        audit = http.get("/v1/audit", params={"operation": "export", "limit": 100})
    with quiet.http(other.admin_key) as http:
        elsewhere = http.post("/v1/subjects/user-x/export")
    assert [a.status_code for a in accepted] == [202] * QUOTA
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "30"
    assert refused.json() == {
        "error": "too_many_jobs", "kind": "export", "limit": QUOTA,
        "detail": "this tenant already has 3 export jobs queued or running, the most it may "
                  "have at once (MEMPLANE_JOB_TENANT_QUOTA); wait for one to finish "
                  "(GET /v1/jobs/{id}) and send the request again"}
    assert (erasure.status_code, elsewhere.status_code) == (202, 202)
    assert [e["success"] for e in audit.json()["items"]].count(False) == 1
    with quiet.runtime.sessions() as session:
        exports = session.scalar(select(func.count()).select_from(Job).where(
            Job.tenant_id == tenant.id, Job.kind == "export"))
        session.commit()  # SQLite: a read that turns into a write fails if a writer came between
        # One finishes: its place is free again.
        begin_write(session)
        session.execute(update(Job).where(Job.id == uuid.UUID(accepted[0].json()["id"]))
                        .values(state="completed"))
        session.commit()
    assert exports == QUOTA
    with quiet.http(tenant.admin_key) as http:
        assert http.post("/v1/subjects/user-x/export").status_code == 202
        assert http.post("/v1/subjects/user-z/export").status_code == 429


def test_concurrent_requests_never_pass_the_quota(runtime: Runtime) -> None:
    """Twelve requests at once for one tenant: exactly the quota is queued, the rest refused.
    (A retention run takes no lock of its own: only the quota's keeps them apart.)"""
    actor = _tenant(runtime, "burst")
    start = threading.Barrier(12)
    answers: list[str] = []

    def ask() -> None:
        with runtime.sessions() as session:
            start.wait()
            try:
                schedule.start_run(session, actor, RetentionRunIn(dry_run=True))
                answers.append("queued")
            except TooManyJobs as refused:
                assert refused.status_code == 429
                answers.append(refused.code)

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    assert sorted(answers) == ["queued"] * QUOTA + ["too_many_jobs"] * (12 - QUOTA)
    with runtime.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Job).where(
            Job.tenant_id == actor.tenant_id)) == QUOTA


# -- running jobs per tenant -------------------------------------------------------------------

def _instant(ctx: JobContext) -> dict[str, Any]:
    return {"ran": ctx.kind}


def _queue(runtime: Runtime, actor: Actor, n: int, prefix: str = "user") -> list[uuid.UUID]:
    with runtime.sessions() as session:
        return [compliance.start_export(session, actor, f"{prefix}-{i}", "json").id
                for i in range(n)]


def test_a_tenant_runs_at_most_its_limit_while_others_are_served(runtime: Runtime) -> None:
    a, b = _tenant(runtime, "a"), _tenant(runtime, "b")
    a_jobs = _queue(runtime, a, 3)
    b_jobs = _queue(runtime, b, 1)
    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings,
                       handlers={"export": _instant}, lease_seconds=3600)
    claimed = [job.id for job in iter(worker.claim, None)]  # claimed, left running
    assert claimed == [a_jobs[0], b_jobs[0], a_jobs[1]]  # A's third waits for a free slot
    assert _job(runtime, a_jobs[2]).state == "queued"


@pytest.mark.databases("postgres")
def test_concurrent_workers_keep_each_tenant_within_its_limit(runtime: Runtime) -> None:
    tenants = [_tenant(runtime, name) for name in ("a", "b", "c")]
    for actor in tenants:
        _queue(runtime, actor, 3)
    claims: list[list[Job]] = [[] for _ in range(6)]
    start = threading.Barrier(len(claims))

    def claim_all(mine: list[Job]) -> None:
        worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings,
                           handlers={"export": _instant}, lease_seconds=3600)
        start.wait()
        while (job := worker.claim()) is not None:
            mine.append(job)

    threads = [threading.Thread(target=claim_all, args=(mine,)) for mine in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    per_tenant = [sum(job.tenant_id == actor.tenant_id for mine in claims for job in mine)
                  for actor in tenants]
    assert per_tenant == [CONCURRENCY] * 3


# -- the step bound ----------------------------------------------------------------------------

def test_a_hung_step_is_abandoned_and_its_thread_can_write_nothing_after(
        runtime: Runtime) -> None:
    actor = _tenant(runtime, "hung")
    [queued] = _queue(runtime, actor, 1)
    release, started = threading.Event(), threading.Event()
    late: list[str] = []

    def hangs(ctx: JobContext) -> dict[str, Any]:
        if ctx.attempts > 1:
            return {"second": True}
        started.set()
        release.wait(DEADLINE_SECONDS)  # a call that does not return, and reports nothing
        try:
            ctx.commit_progress(late=True)
        except LeaseLost:
            late.append("lease_lost")
        return {"first": True}

    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings,
                       handlers={"export": hangs})
    began = time.monotonic()
    assert worker.run_once() == queued  # returns although the handler still hangs
    took = time.monotonic() - began
    assert started.is_set() and not release.is_set()
    abandoned = _job(runtime, queued)
    assert (abandoned.state, abandoned.attempts, abandoned.lease_owner) == ("queued", 1, None)
    assert abandoned.error == STEP_TIMEOUT
    assert STEP <= took < STEP + LEASE + 10  # the bound, a heartbeat to notice, slack
    # The same worker takes the job up again; the old thread's late save must not land.
    retried = worker.claim()
    assert retried is not None and (retried.id, retried.attempts) == (queued, 2)
    release.set()
    wait_until(lambda: late == ["lease_lost"], "the abandoned attempt noticing")
    assert "late" not in (_job(runtime, queued).progress or {})


def test_a_worker_gives_a_tenant_no_more_threads_while_its_abandoned_ones_hang(
        runtime: Runtime) -> None:
    actor = _tenant(runtime, "dead-bucket")
    [queued] = _queue(runtime, actor, 1)
    release = threading.Event()
    attempts: list[int] = []

    def hangs(ctx: JobContext) -> dict[str, Any]:
        attempts.append(ctx.attempts)
        release.wait(DEADLINE_SECONDS)
        return {}

    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings,
                       handlers={"export": hangs})
    try:
        assert [worker.run_once() for _ in range(CONCURRENCY)] == [queued] * CONCURRENCY
        assert worker.abandoned.stuck(actor.tenant_id) == CONCURRENCY
        assert worker.run_once() is None  # queued, but its threads here still hang
        assert (_job(runtime, queued).state, attempts) == ("queued", [1, 2])
    finally:
        release.set()
    wait_until(lambda: worker.abandoned.stuck(actor.tenant_id) == 0, "the threads ending")
    assert worker.run_once() == queued
    assert attempts == [1, 2, 3]


def test_a_job_that_reports_in_may_run_longer_than_the_step_bound(runtime: Runtime) -> None:
    actor = _tenant(runtime, "steady")
    [queued] = _queue(runtime, actor, 1)

    def steady(ctx: JobContext) -> dict[str, Any]:
        until = time.monotonic() + 2 * STEP
        while time.monotonic() < until:
            ctx.check()  # one short step after another
            time.sleep(0.2)
        return {"steps": "done"}

    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings,
                       handlers={"export": steady})
    assert worker.run_once() == queued
    done = _job(runtime, queued)
    assert (done.state, done.attempts, done.result) == ("completed", 1, {"steps": "done"})


class SlowBucket(LocalHTTPServer):
    """A proxy to moto that, once ``slow`` is set, answers every request with a 200 whose body
    trickles one byte a second (no read timeout ever trips) until ``release``."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target
        self.slow = False
        self.trickling = 0  # requests being trickled right now
        self.released = threading.Event()

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if self.slow:
            self._trickle(handler)
        else:
            answer(handler, *forward(self.target, handler.command, handler.path,
                                     dict(handler.headers), body))

    def _trickle(self, handler: BaseHTTPRequestHandler) -> None:
        self.trickling += 1
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", "1000000")
            handler.end_headers()
            while not self.released.wait(1.0):
                handler.wfile.write(b" ")
                handler.wfile.flush()
        except OSError:
            pass
        finally:
            self.trickling -= 1
            handler.close_connection = True

    def stopping(self) -> None:
        self.released.set()


def test_a_stuck_export_delays_another_tenants_job_by_at_most_the_step_bound(
        runtime: Runtime, moto_server: MotoServer) -> None:
    a, b = _tenant(runtime, "slow-bucket"), _tenant(runtime, "bystander")
    bucket = f"slow-{a.tenant_id.hex[:12]}"
    moto_server.create_bucket(bucket)
    stop = threading.Event()
    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings)  # the real handlers
    running = threading.Thread(target=worker.run_forever, args=(stop,))
    with SlowBucket(moto_server.endpoint) as slow:
        with runtime.sessions() as session:
            storage.configure(session, runtime.plane, a, S3ConfigIn.model_validate(
                {"storage_type": "s3", "connection_config": moto_server.config(bucket)
                 | {"endpoint_url": slow.url}}), allow_local=False, local_roots=[])
        slow.slow = True
        [stuck] = _queue(runtime, a, 1, "ana")
        [waiting] = _queue(runtime, b, 1, "bob")  # queued after A's, one worker for both
        queued_at = time.monotonic()
        running.start()
        try:
            wait_until(lambda: _job(runtime, waiting).state == "completed",
                       "the other tenant's export completing")
            took = time.monotonic() - queued_at
            assert slow.trickling >= 1  # A's bucket is still answering, a byte a second
            first = _job(runtime, stuck)
        finally:
            stop.set()
            running.join(DEADLINE_SECONDS)
    # B waited for A's first step to overrun its bound (noticed within a heartbeat), no more.
    assert took < STEP + LEASE + 15
    assert first.error == STEP_TIMEOUT
    assert first.attempts >= 1 and first.result is None
    assert _job(runtime, waiting).result["counts"]["pointers"] == 0
