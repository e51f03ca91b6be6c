"""``memplane serve --workers 2`` on PostgreSQL and on the embedded SQLite file: requests land
on both workers; a change made through one worker (a key revoked, a DLP policy) is seen by
the other at once; the background work runs in one process; /metrics sums both workers and
is still behind its token; the migrations and the default tenant happen once.

Each worker names itself in an ``x-memplane-pid`` header (MEMPLANE_TEST_PID_HEADER, a test
hook). Requests go out on new connections, spread by the kernel over the two workers'
accepts; each check loops until it saw both workers answer (with a bound on the attempts).
The key cache trusts a key for 300 s here, so only the host's board can explain a worker
refusing a key another worker revoked. The DLP policy cache's 5 s is fixed: that check is
only as strict as asking the other worker right after the change.
"""

from __future__ import annotations

import os
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from control_plane.db.engine import make_engine
from control_plane.db.models import AccessLog
from tests.faults.conftest import make_env
from tests.support.clock import wait_until
from tests.support.process import ServerProcess

pytestmark = pytest.mark.slow

METRICS_TOKEN = "metrics-" + secrets.token_hex(16)
BOTH_WITHIN = 120.0  # seconds of requests on new connections until both workers answered


@dataclass
class Served:
    server: ServerProcess
    database_url: str
    admin_key: str
    output: Path

    def call(self, method: str, path: str, key: str | None = None,
             **kwargs: object) -> httpx.Response:
        """One request on a connection of its own (so either worker may take it)."""
        headers = {"Authorization": f"Bearer {key or self.admin_key}"}
        return httpx.request(method, f"{self.server.base_url}{path}", headers=headers,
                             timeout=30, **kwargs)  # type: ignore[arg-type]

    def on_both(self, send: Callable[[], httpx.Response]) -> dict[int, list[httpx.Response]]:
        """``send`` again until both workers answered; the answers by worker pid."""
        answers: dict[int, list[httpx.Response]] = {}
        deadline = time.monotonic() + BOTH_WITHIN
        while time.monotonic() < deadline:
            answer = send()
            answers.setdefault(int(answer.headers["x-memplane-pid"]), []).append(answer)
            if len(answers) == 2:
                return answers
        raise AssertionError(f"only worker(s) {sorted(answers)} answered in {BOTH_WITHIN} s")


@pytest.fixture(scope="module", params=["postgres", "sqlite"])
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server per backend for the module's tests (each starts three processes)."""
    tmp_path = tmp_path_factory.mktemp(f"workers-{request.param}")
    common = {"MEMPLANE_WORKERS": "2", "MEMPLANE_TEST_PID_HEADER": "1",
              "MEMPLANE_LOG_LEVEL": "INFO", "MEMPLANE_METRICS_TOKEN": METRICS_TOKEN,
              "MEMPLANE_AUTH_CACHE_SECONDS": "300", "MEMPLANE_AUDIT_SEAL_INTERVAL_SECONDS": "0.2",
              "MEMPLANE_EMBED_ON_WRITE": "true", "MEMPLANE_COMPACTOR_SCHEDULE": "off"}
    output = tmp_path / "serve.log"
    if request.param == "postgres":
        url = request.getfixturevalue("postgres").create_database()
        env = make_env(url, tmp_path / "data")
        admin_key = env["MEMPLANE_ADMIN_KEY"]
        server = ServerProcess(env | common, output=output).start(timeout=120)
    else:  # the embedded default: no database URL, no admin key (one is printed)
        data_dir = tmp_path / "data"
        url = f"sqlite:///{data_dir / 'memplane.db'}"
        server = ServerProcess(common | {"MEMPLANE_DATA_DIR": str(data_dir)}, output=output)
        server.env = {k: v for k, v in server.env.items()
                      if k not in ("MEMPLANE_DATABASE_URL", "MEMPLANE_ADMIN_KEY")}
        server.start(timeout=120)
        printed = re.findall(r"^\s+(mp_\S+)$", output.read_text(), re.MULTILINE)
        assert len(printed) == 1
        admin_key = printed[0]
    try:
        yield Served(server, url, admin_key, output)
    finally:
        server.stop()


_NOT_FOUND = ('memplane_http_requests_total{method="GET",'
              'route="/v1/memories/{scope}/{scope_ref}/{key}",status="404"}')


def _counted(served: Served) -> float:
    """The summed count of GETs of a memory answered 404, from /metrics (0 before any)."""
    scraped = httpx.get(f"{served.server.base_url}/metrics", timeout=10,
                        headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200
    found = [float(row.rsplit(" ", 1)[1]) for row in scraped.text.splitlines()
             if row.startswith(_NOT_FOUND + " ")]
    assert len(found) <= 1
    return found[0] if found else 0.0


def test_requests_land_on_both_workers_and_metrics_sum_them(served: Served) -> None:
    before = _counted(served)
    missing = f"/v1/memories/user/u-{uuid.uuid4().hex[:8]}/nothing"
    answers = served.on_both(lambda: served.call("GET", missing))
    sent = sum(len(a) for a in answers.values())
    assert {a.status_code for found in answers.values() for a in found} == {404}
    refused = httpx.get(f"{served.server.base_url}/metrics", timeout=10)
    assert refused.status_code == 401
    assert _counted(served) - before == sent  # both workers' requests, in one sum


def test_a_key_revoked_through_one_worker_is_refused_by_the_other(served: Served) -> None:
    created = served.call("POST", "/v1/api-keys", json={"role": "agent", "name": "w"}).json()
    key, key_id = created["api_key"], created["id"]
    path = "/v1/memories/user/alice/colour"
    assert served.call("PUT", path, key, json={"value": "teal"}).status_code == 200
    # Both workers validate the key and keep it in their caches (for 300 s here).
    trusted = served.on_both(lambda: served.call("GET", path, key))
    assert {a.status_code for found in trusted.values() for a in found} == {200}
    revoked = served.call("DELETE", f"/v1/api-keys/{key_id}")
    assert revoked.status_code == 204
    after = served.on_both(lambda: served.call("GET", path, key))
    assert {a.status_code for found in after.values() for a in found} == {401}
    assert set(after) == set(trusted)  # the worker that revoked it and the other one


def test_a_dlp_policy_set_through_one_worker_holds_on_the_other(served: Served) -> None:
    path = "/v1/memories/user/bob/card"
    flagged = served.on_both(lambda: served.call("PUT", path, json={"value": "4111 1111 1111 "
                                                                              "1111"}))
    assert {a.status_code for found in flagged.values() for a in found} == {200}
    assert served.call("PUT", "/v1/dlp/policy", json={"mode": "refuse"}).status_code == 200
    refused = served.on_both(lambda: served.call("PUT", path, json={"value": "4111 1111 1111 "
                                                                              "1111"}))
    assert {a.status_code for found in refused.values() for a in found} == {422}


def _spawned_children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"spawn_main" in command:
            found.append(int(entry))
    return sorted(found)


def test_background_work_runs_once_and_the_start_up_work_too(served: Served) -> None:
    assert served.server.process is not None
    parent = served.server.process.pid
    answers = served.on_both(lambda: served.call("PUT", "/v1/memories/user/carol/note",
                                                 json={"value": {"text": "violet umbrella"}}))
    workers = set(answers)
    # The parent's processes: the two workers and one more (the background process); no
    # worker started a process of its own.
    children = _spawned_children(parent)
    assert len(children) == 3 and workers < set(children)
    assert all(_spawned_children(worker) == [] for worker in workers)
    with httpx.Client(base_url=served.server.base_url, timeout=10,
                      headers={"Authorization": f"Bearer {served.admin_key}"}) as http:
        wait_until(lambda: http.get("/v1/memories/user/carol/note").json()["pointer"]
                   ["has_embeddings"], "the indexer's vector of the note")
    engine = make_engine(served.database_url)
    try:
        def unsealed() -> int:
            with engine.connect() as connection:
                return int(connection.scalar(select(func.count()).select_from(AccessLog)
                                             .where(AccessLog.seq.is_(None))) or 0)

        wait_until(lambda: unsealed() == 0, "the sealing of every audit row")
        with engine.connect() as connection:
            rows = connection.execute(select(AccessLog.tenant_id, AccessLog.seq)).all()
    finally:
        engine.dispose()
    by_tenant: dict[uuid.UUID, list[int]] = {}
    for tenant, seq in rows:
        by_tenant.setdefault(tenant, []).append(int(seq))
    for seqs in by_tenant.values():  # each row sealed once, in one chain without a gap
        assert sorted(seqs) == list(range(1, len(seqs) + 1))
    with httpx.Client(base_url=served.server.base_url, timeout=30,
                      headers={"Authorization": f"Bearer {served.admin_key}"}) as http:
        verified = http.get("/v1/audit/verify")
    assert verified.status_code == 200 and verified.json()["ok"] is True
    log = served.output.read_text()
    if served.database_url.startswith("sqlite"):  # the embedded default migrates itself
        assert log.count("Running upgrade  -> 0001") == 1
        assert log.count("created the default tenant") == 1
