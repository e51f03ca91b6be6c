"""Scale-out on one machine: 3 `memplane serve` processes (MEMPLANE_RUN_JOBS=false) and 3
`memplane worker` processes against one PostgreSQL and one bucket (a local directory shared
by every process, standing in for the tenant's cloud bucket).

- concurrent writes through all three APIs leave one valid audit chain (verify ok, checked
  == the rows in the database);
- 20 exports and 20 erasures of different subjects, spread over the workers, each run
  exactly once: one claim (attempts == 1), one completion line in exactly one worker's log,
  one completion audit row, one receipt per erasure;
- a worker SIGKILLed in the middle of an erasure (stopped at a known step by
  ``stalling_worker``; no sleeps) has its job taken over once its short lease ran out, and
  the receipt counts every pointer of the subject exactly once.

Everything waits on conditions with a deadline; nothing asserts on timing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from control_plane.compliance.receipts import served
from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.db.models import AccessLog, ErasureReceipt, Job, MemoryPointer
from control_plane.plane.credentials import CredentialBox
from memplane._receipts import verify_receipt
from tests.support.postgres import PostgresCluster
from tests.support.process import CHECKOUT, MEMPLANE, ChildProcess, ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ADMIN_KEY = "mp_scaleout_" + secrets.token_hex(16)
APIS = 3
WORKERS = 3
SUBJECTS = 20
PER_SUBJECT = 3  # memories of each subject: one user-scoped, two in conversations
WRITERS_PER_API = 4
WRITES_PER_WRITER = 10
VICTIM_LEASE_SECONDS = 2
STALL_AT = "erase:after_objects"  # the victim dies after deleting objects, before the rows
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 90,
             explain: Callable[[], str] = str) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` at the
    deadline. The deadline only bounds a hang; no assertion depends on how long it took."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what} {explain()}")
        time.sleep(0.05)


@dataclass
class WorkerProcess(ChildProcess):
    """A job worker child; its stdout/stderr (JSON log lines) go to files the test reads."""

    env: dict[str, str]
    logs: Path
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    name: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @property
    def stdout(self) -> Path:
        return self.logs / f"worker-{self.name}.out"

    @property
    def stderr(self) -> Path:
        return self.logs / f"worker-{self.name}.err"

    def start(self) -> WorkerProcess:
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=err,
                                            cwd=CHECKOUT, start_new_session=True)
        # It says so on stderr (a console line that may wrap, hence the split/join).
        wait_for(f"worker {self.name} to start",
                 lambda: self._exited() or self.started(), timeout=60,
                 explain=lambda: self.stdout.read_text()[-500:] + self.stderr.read_text()[-1500:])
        assert self.process.poll() is None, self.stderr.read_text()[-2000:]
        return self

    def started(self) -> bool:
        return "waiting for jobs" in " ".join(self.stderr.read_text().split())

    def _exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def finished_jobs(self) -> list[tuple[str, str, int, str]]:
        """(job id, kind, attempt, state) of every job this worker recorded the end of."""
        done = []
        for line in self.stderr.read_text().splitlines():
            with contextlib.suppress(ValueError):
                message = json.loads(line).get("message", "")
                if message.startswith("job ") and " by worker " in message:
                    job_id, kind, _, attempt, state = message.split()[1:6]
                    done.append((job_id, kind, int(attempt), state))
        return done


@dataclass
class Cluster:
    env: dict[str, str]
    engine: Engine
    apis: list[ServerProcess]
    bucket_root: Path
    logs: Path
    workers: list[WorkerProcess] = field(default_factory=list)

    def http(self, i: int) -> httpx.Client:
        return httpx.Client(base_url=self.apis[i % len(self.apis)].base_url, timeout=30,
                            headers={"Authorization": f"Bearer {ADMIN_KEY}"})

    def worker(self, *argv: str, env: dict[str, str] | None = None) -> WorkerProcess:
        started = WorkerProcess({**self.env, **(env or {})}, self.logs, list(argv)).start()
        self.workers.append(started)
        return started


@pytest.fixture
def cluster(postgres: PostgresCluster, tmp_path: Path) -> Iterator[Cluster]:
    database_url = postgres.create_database()
    engine = make_engine(database_url)
    upgrade(engine)
    data_dir, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH"))
                                      if p),
        "MEMPLANE_DATABASE_URL": database_url, "MEMPLANE_SERVER_KEY": secrets.token_hex(24),
        "MEMPLANE_DATA_DIR": str(data_dir), "MEMPLANE_ADMIN_KEY": ADMIN_KEY,
        "MEMPLANE_DEFAULT_BUCKET_URL": f"file://{data_dir / 'bucket'}",
        # Every replica signs receipts and audit checkpoints with the same key.
        "MEMPLANE_RECEIPT_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "MEMPLANE_RUN_JOBS": "false", "MEMPLANE_JOB_POLL_INTERVAL_SECONDS": "0.1",
        "MEMPLANE_JOB_LEASE_SECONDS": "60", "MEMPLANE_LOG_LEVEL": "INFO",
        # One tenant queues all 41 jobs and every worker may run them side by side.
        "MEMPLANE_JOB_TENANT_QUOTA": "100", "MEMPLANE_JOB_TENANT_CONCURRENCY": "10",
        # The receipts' object counts below are of memories alone: no search vectors beside
        # them (tests/search covers what an erasure does to those).
        "MEMPLANE_EMBED_ON_WRITE": "false",
    }
    apis: list[ServerProcess] = []
    built = Cluster(env, engine, apis, data_dir / "bucket", logs)
    try:
        # One after the other: the first creates the default tenant, the others find it.
        for _ in range(APIS):
            apis.append(ServerProcess({**env, "MEMPLANE_LOG_LEVEL": "WARNING"}).start())
        yield built
    finally:
        for worker in built.workers:
            worker.stop()
        for api in apis:
            api.stop()
        engine.dispose()


def test_three_apis_and_three_workers_share_one_database_and_bucket(cluster: Cluster) -> None:
    # 1. Concurrent writes through every API process: one audit chain, still valid.
    def writer(n: int) -> int:
        with cluster.http(n) as http:
            for j in range(WRITES_PER_WRITER):
                response = http.put(f"/v1/memories/agent/scaleout/w{n}-k{j % 4}",
                                    json={"value": {"writer": n, "j": j}})
                assert response.status_code == 200, response.text
        return WRITES_PER_WRITER

    exported = [f"export-subject-{i:02d}" for i in range(SUBJECTS)]
    erased = [f"erase-subject-{i:02d}" for i in range(SUBJECTS)]
    victim = "erase-subject-victim"

    def subject_writer(n: int, subject: str) -> int:
        with cluster.http(n) as http:
            for j in range(PER_SUBJECT):
                path = (f"/v1/memories/user/{subject}/k{j}" if j == 0
                        else f"/v1/memories/conversation/c-{subject}-{j}/k{j}")
                response = http.put(path, json={"value": {"note": f"{subject} {j}"},
                                                "user_id": subject})
                assert response.status_code == 200, response.text
        return PER_SUBJECT

    with ThreadPoolExecutor(APIS * WRITERS_PER_API) as pool:
        writes = list(pool.map(writer, range(APIS * WRITERS_PER_API)))
        subjects = [*exported, *erased, victim]
        writes += list(pool.map(subject_writer, range(len(subjects)), subjects))
    assert sum(writes) == APIS * WRITERS_PER_API * WRITES_PER_WRITER + len(subjects) * PER_SUBJECT
    _assert_chain_valid(cluster)

    # 2. A worker dies in the middle of an erasure; its job waits for its lease to run out.
    marker = cluster.logs / "stalled"
    victim_worker = cluster.worker(
        sys.executable, "-m", "tests.scaleout.stalling_worker",
        "--lease-seconds", str(VICTIM_LEASE_SECONDS),
        env={"MEMPLANE_TEST_STALL_AT": STALL_AT, "MEMPLANE_TEST_STALL_MARKER": str(marker)})
    with cluster.http(0) as http:
        victim_job = http.post(f"/v1/subjects/{victim}/erase").json()["id"]
    wait_for("the victim worker to reach its stall point", marker.exists)
    assert marker.read_text() == victim_job
    victim_worker.kill()
    stalled = _job(cluster, victim_job)
    assert (stalled.state, stalled.attempts) == ("running", 1)
    assert stalled.progress["objects"] == 0  # objects went, rows and counts not yet saved
    with cluster.engine.connect() as db:
        assert db.scalar(select(func.count()).select_from(MemoryPointer)
                         .where(MemoryPointer.subject_user_id == victim)) == PER_SUBJECT

    # 3. Three workers; 20 exports and 20 erasures enqueued through all three APIs.
    workers = [cluster.worker(str(MEMPLANE), "worker") for _ in range(WORKERS)]

    def enqueue(n: int, subject: str, kind: str) -> str:
        with cluster.http(n) as http:
            response = http.post(f"/v1/subjects/{subject}/{kind}")
            assert response.status_code == 202, response.text
            return str(response.json()["id"])

    with ThreadPoolExecutor(8) as pool:
        export_jobs = list(pool.map(enqueue, range(SUBJECTS), exported, ["export"] * SUBJECTS))
        erase_jobs = list(pool.map(enqueue, range(SUBJECTS), erased, ["erase"] * SUBJECTS))
    all_jobs = [*export_jobs, *erase_jobs, victim_job]
    assert len(set(all_jobs)) == 2 * SUBJECTS + 1

    def all_done() -> bool:
        with cluster.engine.connect() as db:
            states = db.execute(select(Job.state).where(
                Job.id.in_([uuid.UUID(j) for j in all_jobs]))).scalars().all()
        unfinished = [s for s in states if s not in ("completed", "failed")]
        return len(states) == len(all_jobs) and not unfinished

    wait_for("all 41 jobs to finish", all_done, timeout=120)

    # Each job: completed, claimed once (the victim's twice), finished by exactly one worker.
    jobs = {j: _job(cluster, j) for j in all_jobs}
    assert {j: (job.state, job.error) for j, job in jobs.items()} == \
        {j: ("completed", None) for j in all_jobs}
    assert {j: job.attempts for j, job in jobs.items()} == \
        {j: 2 if j == victim_job else 1 for j in all_jobs}
    finishers: dict[str, list[str]] = {}
    for worker in [victim_worker, *workers]:
        for job_id, kind, attempt, state in worker.finished_jobs():
            assert state == "completed", (job_id, kind, attempt, state)
            finishers.setdefault(job_id, []).append(worker.name)
    assert sorted(finishers) == sorted(all_jobs)
    assert {j: len(names) for j, names in finishers.items()} == {j: 1 for j in all_jobs}
    assert victim_worker.name not in {names[0] for names in finishers.values()}
    spread = Counter(names[0] for names in finishers.values())
    assert len(spread) >= 2, f"one worker ran every job: {spread}"
    print(json.dumps({"jobs_per_worker": sorted(spread.values(), reverse=True)}))

    # One completion audit row per job; one takeover, of the victim's job, from the victim.
    with cluster.engine.connect() as db:
        rows = db.execute(select(AccessLog.operation, AccessLog.detail).where(
            AccessLog.operation.in_(("export", "erase", "job_takeover")))).all()
        receipts = db.execute(select(ErasureReceipt.job_id, ErasureReceipt.body,
                                     ErasureReceipt.signature)).all()
        left = db.scalar(select(func.count()).select_from(MemoryPointer).where(
            MemoryPointer.subject_user_id.in_([*erased, victim])))
    completions = Counter(
        detail.split(":")[0].removeprefix("job ") for op, detail in rows
        if (op == "export" and ": archive of " in detail)
        or (op == "erase" and ": erasure completed" in detail))
    assert completions == Counter(all_jobs)
    starts = Counter(detail.split(":")[0].removeprefix("job ") for op, detail in rows
                     if op == "erase" and ": erasure started" in detail)
    assert starts == Counter([*erase_jobs, victim_job])
    takeovers = [detail for op, detail in rows if op == "job_takeover"]
    assert len(takeovers) == 1 and takeovers[0].startswith(f"job {victim_job} erase from ")
    assert "stalling" not in takeovers[0] and "after attempt 1" in takeovers[0]
    assert left == 0

    # One receipt per erasure, signed, counting each pointer of the subject exactly once.
    assert sorted(str(job_id) for job_id, _, _ in receipts) == sorted([*erase_jobs, victim_job])
    with cluster.http(1) as http:
        public_key = http.get("/v1/receipts/public-key").text
    for job_id, body, signature in receipts:
        signed = served(body, CredentialBox(cluster.env["MEMPLANE_SERVER_KEY"]))
        assert verify_receipt({**signed, "signature": signature}, public_key), job_id
        assert body["counts"]["pointers"] == PER_SUBJECT, (job_id, body["counts"])
        assert body["counts"]["objects"] == PER_SUBJECT, (job_id, body["counts"])
    with cluster.http(2) as http:
        for job_id in erase_jobs + [victim_job]:
            receipt_id = jobs[job_id].result["receipt_id"]  # type: ignore[index]
            read = http.get(f"/v1/receipts/{receipt_id}")
            assert read.status_code == 200, read.text
            assert read.json()["job_id"] == job_id

    # Every export archive is in the shared bucket; no erased subject's object is left.
    for job_id in export_jobs:
        archive = jobs[job_id].result["archive_path"]  # type: ignore[index]
        assert (cluster.bucket_root / archive).is_file(), archive
    leftovers = [p for p in cluster.bucket_root.rglob("*")
                 if p.is_file() and any(s in p.as_posix() for s in [*erased, victim])]
    assert leftovers == []
    _assert_chain_valid(cluster)


def _job(cluster: Cluster, job_id: str) -> Job:
    with Session(cluster.engine, expire_on_commit=False) as db:
        return db.execute(select(Job).where(Job.id == uuid.UUID(job_id))).scalars().one()


def _assert_chain_valid(cluster: Cluster) -> None:
    """Every API process verifies the same chain, and it covers every row in the database.

    The sealers of all three APIs run concurrently; each check waits until no row is left
    unsealed (each verification adds an audit row of its own, sealed shortly after)."""

    def rows_when_sealed() -> int | None:
        with cluster.engine.connect() as db:
            unsealed = db.scalar(select(func.count()).select_from(AccessLog)
                                 .where(AccessLog.seq.is_(None)))
            return None if unsealed else db.scalar(select(func.count()).select_from(AccessLog))

    for i in range(APIS):
        rows = wait_for("the audit chain to be sealed", rows_when_sealed)
        with cluster.http(i) as http:
            report = http.get("/v1/audit/verify").json()
        assert report["ok"] is True, json.dumps(report)
        assert (report["checked"], report["unsealed"], report["first_bad_seq"]) == \
            (rows, 0, None), (report, rows)
