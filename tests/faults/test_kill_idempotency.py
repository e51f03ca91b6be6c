"""Idempotency keys across a SIGKILL and a restart: a retried write answers with the stored
first answer, the memory's version does not move, and a retried append is not applied twice
— whether the first attempt was acknowledged, or killed after its commit but before its
answer (a pause point at ``write:after_commit``, control_plane/testhooks.py), or killed
before its commit (then the retry writes, once)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.process import wait_for_pause

from .conftest import Deployment

pytestmark = pytest.mark.slow


@pytest.fixture
def deployment(any_deployment: Deployment) -> Deployment:
    """PostgreSQL and SQLite (tests/faults/conftest.py)."""
    return any_deployment


def _kill_at(deployment: Deployment, step: str, pause_file: Path,
             send: Any) -> None:
    """Restart the server with a pause point at ``step``, send one request from a thread,
    SIGKILL the server once the request reached the step, start it again without pause."""
    import threading

    server = deployment.server
    server.kill()
    server.start(pause_at=step, pause_file=pause_file)
    outcome: list[BaseException | httpx.Response] = []

    def call() -> None:
        try:
            with deployment.http() as http:
                outcome.append(send(http))
        except BaseException as exc:  # noqa: BLE001 - recorded and asserted on below
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    wait_for_pause(pause_file, server.process)
    server.kill()
    thread.join(timeout=30)
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.TransportError), outcome
    server.start()


def _put(http: httpx.Client, key: str, value: Any, idem: str) -> httpx.Response:
    return http.put(f"/v1/memories/agent/idem/{key}", json={"value": value},
                    headers={"Idempotency-Key": idem})


def _append(http: httpx.Client, key: str, item: Any, idem: str) -> httpx.Response:
    return http.post(f"/v1/memories/agent/idem/{key}/append", json={"value": item},
                     headers={"Idempotency-Key": idem})


def _get(http: httpx.Client, key: str) -> dict[str, Any]:
    response = http.get(f"/v1/memories/agent/idem/{key}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.timeout(300)
def test_acknowledged_write_and_append_replay_after_sigkill(deployment: Deployment) -> None:
    put_key, append_key = secrets.token_hex(8), secrets.token_hex(8)
    with deployment.http() as http:
        first_put = _put(http, "doc", {"n": 1}, put_key)
        assert first_put.status_code == 200, first_put.text
        assert _append(http, "log", "a", secrets.token_hex(8)).status_code == 200
        first_append = _append(http, "log", "b", append_key)
        assert first_append.status_code == 200, first_append.text
    deployment.server.kill()
    deployment.server.start()
    with deployment.http() as http:
        again = _put(http, "doc", {"n": 1}, put_key)
        assert again.status_code == 200
        assert again.headers.get("Idempotent-Replayed") == "true"
        assert again.json() == first_put.json()
        appended = _append(http, "log", "b", append_key)
        assert appended.status_code == 200
        assert appended.headers.get("Idempotent-Replayed") == "true"
        assert appended.json() == first_append.json()
        doc, log = _get(http, "doc"), _get(http, "log")
    assert (doc["value"], doc["pointer"]["version"]) == ({"n": 1}, 1)
    assert doc["pointer"]["content_sha256"] == first_put.json()["content_sha256"]
    assert (log["value"], log["pointer"]["version"]) == (["a", "b"], 2)
    assert log["pointer"]["storage_path"] == first_append.json()["storage_path"]


@pytest.mark.timeout(300)
def test_write_killed_after_commit_before_answer_replays_on_retry(deployment: Deployment,
                                                                  tmp_path: Path) -> None:
    put_key, append_key = secrets.token_hex(8), secrets.token_hex(8)
    with deployment.http() as http:
        assert _append(http, "log", "a", secrets.token_hex(8)).status_code == 200
    _kill_at(deployment, "write:after_commit", tmp_path / "pause-put",
             lambda http: _put(http, "doc", {"n": 2}, put_key))
    _kill_at(deployment, "write:after_commit", tmp_path / "pause-append",
             lambda http: _append(http, "log", "b", append_key))
    with deployment.http() as http:
        doc_before, log_before = _get(http, "doc"), _get(http, "log")
        again = _put(http, "doc", {"n": 2}, put_key)
        appended = _append(http, "log", "b", append_key)
        doc, log = _get(http, "doc"), _get(http, "log")
    # The commit happened before the kill; the retry gets that write's answer, not a second
    # write.
    assert again.status_code == 200, again.text
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["id"] == doc_before["pointer"]["id"]
    assert again.json()["version"] == 1
    assert appended.status_code == 200, appended.text
    assert appended.headers.get("Idempotent-Replayed") == "true"
    assert appended.json()["version"] == 2
    assert (doc["value"], doc["pointer"]["version"]) == ({"n": 2}, 1)
    assert doc["pointer"] == doc_before["pointer"]
    assert (log["value"], log["pointer"]["version"]) == (["a", "b"], 2)
    assert log["pointer"] == log_before["pointer"]


@pytest.mark.timeout(300)
def test_write_killed_before_commit_is_written_once_by_the_retry(deployment: Deployment,
                                                                 tmp_path: Path) -> None:
    put_key, append_key = secrets.token_hex(8), secrets.token_hex(8)
    with deployment.http() as http:
        assert _append(http, "log", "a", secrets.token_hex(8)).status_code == 200
    _kill_at(deployment, "write:after_put", tmp_path / "pause-put",
             lambda http: _put(http, "doc", {"n": 3}, put_key))
    _kill_at(deployment, "write:after_put", tmp_path / "pause-append",
             lambda http: _append(http, "log", "b", append_key))
    with deployment.http() as http:
        assert http.get("/v1/memories/agent/idem/doc").status_code == 404
        assert _get(http, "log")["value"] == ["a"]
        first = _put(http, "doc", {"n": 3}, put_key)
        first_append = _append(http, "log", "b", append_key)
        again = _put(http, "doc", {"n": 3}, put_key)
        again_append = _append(http, "log", "b", append_key)
        doc, log = _get(http, "doc"), _get(http, "log")
    # Nothing committed before the kill: the retry is the write, and its own retry replays.
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    assert first_append.status_code == 200 and "Idempotent-Replayed" not in first_append.headers
    assert again.headers.get("Idempotent-Replayed") == "true" and again.json() == first.json()
    assert again_append.headers.get("Idempotent-Replayed") == "true"
    assert again_append.json() == first_append.json()
    assert (doc["value"], doc["pointer"]["version"]) == ({"n": 3}, 1)
    assert (log["value"], log["pointer"]["version"]) == (["a", "b"], 2)
