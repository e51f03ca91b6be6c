"""The request id is carried into every log line a request causes: a 500's body names an id
that a log line of the failure carries, and a job a request queues logs under that
request's id when a worker runs it."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane.db.models import Job
from control_plane.observability.json_logs import JsonFormatter, RequestIdFilter
from tests.support.service import (
    BOOTSTRAP_KEY,
    ServerThread,
    Stack,
    Tenant,
    isolated_database,
    make_settings,
)


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the server logs (at INFO) while the test runs, as the JSON lines it writes."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


def test_a_500_names_a_request_id_a_log_line_carries(
        database: str, request: pytest.FixtureRequest, tmp_path: Path,
        log_lines: io.StringIO) -> None:
    # A server built without the CLI's start-up checks, on a bucket URL with no scheme:
    # every write fails inside the server.
    url = isolated_database(database, request)
    settings = make_settings(url, tmp_path / "data", default_bucket_url="no-scheme/bucket")
    server = ServerThread(settings).start()
    try:
        answer = httpx.put(f"http://127.0.0.1:{server.port}/v1/memories/user/u1/lang",
                           json={"value": "fr"}, timeout=30,
                           headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"})
    finally:
        server.stop()
    assert answer.status_code == 500
    body = answer.json()
    request_id = answer.headers["x-request-id"]
    assert body == {"error": "internal_error",
                    "detail": f"the server failed; the log lines of request {request_id} say "
                              "why (quote it when reporting the failure)",
                    "request_id": request_id}
    failures = [line for line in lines(log_lines) if line["message"] == "unhandled error"]
    assert [line["request_id"] for line in failures] == [request_id]
    assert "UnknownBackend" in failures[0]["exception"]


def test_a_job_logs_under_the_id_of_the_request_that_queued_it(
        stack: Stack, tenant: Tenant, log_lines: io.StringIO) -> None:
    request_id = f"req-{uuid.uuid4().hex}"
    with stack.http(tenant.admin_key) as http:
        queued = http.post("/v1/subjects/u-export/export", json={},
                           headers={"X-Request-Id": request_id})
        assert queued.status_code == 202, queued.text
        job_id = queued.json()["id"]
        deadline = time.monotonic() + 60
        while http.get(f"/v1/jobs/{job_id}").json()["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, "the export did not finish"
            time.sleep(0.1)
    with stack.runtime.sessions() as session:
        job = session.get(Job, uuid.UUID(job_id))
        assert job is not None and job.request_id == request_id
    worker = [line for line in lines(log_lines)
              if line["logger"] == "control_plane.jobs.worker" and job_id in line["message"]]
    assert worker and {line["request_id"] for line in worker} == {request_id}
