"""schemathesis against /openapi.json: no input makes the server 5xx, and a second tenant's
admin key, pointed at the first tenant's ids, never gets a 2xx on them.

Both runs are deterministic and CI-friendly: one worker (the multi-worker mode crashes on
this CPython, gh-106905), a fixed seed, no example database, and schemathesis's own
hypothesis settings (no deadline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import ADMIN_KEY, Deployment

pytestmark = pytest.mark.slow

ST = Path(sys.executable).with_name("st")
HOOKS = Path(__file__).with_name("tenant_two_hooks.py")
SEED = "20261130"
# Routes that take an id (or a memory address) of the first tenant in their path.
ID_ROUTES = {
    ("GET", "/v1/memories/{scope}/{scope_ref}/{key}"),
    ("DELETE", "/v1/memories/{scope}/{scope_ref}/{key}"),
    ("DELETE", "/v1/api-keys/{key_id}"), ("GET", "/v1/jobs/{job_id}"),
    ("GET", "/v1/exports/{job_id}/download"), ("GET", "/v1/receipts/{receipt_id}"),
    ("GET", "/v1/events/{event_id}"), ("GET", "/v1/entries/{entry_id}"),
    ("DELETE", "/v1/entries/{entry_id}"), ("GET", "/memory/{entry_id}"),
    ("DELETE", "/memory/{entry_id}"),
}


def _st(deployment: Deployment, api_key: str, *args: str,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ST), "run", f"{deployment.server.base_url}/openapi.json",
         "--header", f"Authorization: Bearer {api_key}", "--seed", SEED, "--workers", "1",
         "--generation-database", "none", "--no-color", *args],
        capture_output=True, text=True, timeout=540, env={**os.environ, **(env or {})},
    )


def _passed(result: subprocess.CompletedProcess[str]) -> None:
    summary = result.stdout[-3000:]
    assert result.returncode == 0, summary + result.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary.split("Test cases:")[-1]


@pytest.mark.timeout(600)
def test_no_generated_request_gets_a_server_error(deployment: Deployment) -> None:
    _passed(_st(deployment, ADMIN_KEY, "--checks", "not_a_server_error",
                "--phases", "examples,coverage,fuzzing", "--max-examples", "40"))


def _wait(http: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("completed", "failed"):
            assert job["state"] == "completed", job
            return job  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish")


def _tenant_one(deployment: Deployment) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Memories, an export, an erasure receipt and an API key in the first tenant; returns
    their ids and what the first tenant sees of them."""
    user, erased = f"one-{uuid.uuid4().hex[:8]}", f"gone-{uuid.uuid4().hex[:8]}"
    with deployment.http() as http:
        set_ = http.put(f"/v1/memories/user/{user}/profile", json={"value": {"name": "Ada"}})
        appended = http.post(f"/v1/memories/user/{user}/notes/append", json={"value": "n1"})
        http.put(f"/v1/memories/user/{erased}/k", json={"value": 1}).raise_for_status()
        key = http.post("/v1/api-keys", json={"role": "agent", "name": "fuzz target"})
        export = http.post(f"/v1/subjects/{user}/export", json={"format": "json"})
        erase = http.post(f"/v1/subjects/{erased}/erase", json={})
        event = http.post("/v1/events", json={"scope": "user", "scope_ref": user,
                                              "kind": "call_summary", "body": "Ada called."})
        entry = http.post("/v1/entries", json={"scope": "user", "scope_ref": user,
                                               "title": "Ada", "summary": "Prefers email."})
        for response in (set_, appended, key, export, erase, event, entry):
            response.raise_for_status()
        _wait(http, export.json()["id"])
        receipt = _wait(http, erase.json()["id"])["result"]["receipt_id"]
    ids = {"scopes": ["user"], "scope_refs": [user, erased], "keys": ["profile", "notes"],
           "user_ids": [user, erased], "pointer_ids": [set_.json()["id"], appended.json()["id"]],
           "job_ids": [export.json()["id"], erase.json()["id"]], "receipt_ids": [receipt],
           "api_key_ids": [key.json()["id"]], "event_ids": [event.json()["id"]],
           "entry_ids": [entry.json()["id"]]}
    return ids, {"user": user, "agent_key": key.json()["api_key"]}


def _second_tenant(deployment: Deployment) -> str:
    with deployment.http() as http:
        created = http.post("/v1/tenants", json={"name": "second tenant"})
    created.raise_for_status()
    return created.json()["api_key"]  # type: ignore[no-any-return]


@pytest.mark.timeout(600)
def test_a_second_tenant_never_gets_a_2xx_on_the_first_tenants_ids(
        deployment: Deployment, tmp_path: Path) -> None:
    ids, seen = _tenant_one(deployment)
    second = _second_tenant(deployment)
    log = tmp_path / "checked.jsonl"
    # Writes that take a name (a memory address, a subject id) rather than an id make the
    # second tenant's own resource under that name, a legitimate 2xx; they stay out, so every
    # 2xx below would be the first tenant's data. (tests/api/test_isolation.py covers them.)
    result = _st(deployment, second, "--checks", "not_a_server_error,tenant_one_stays_hidden",
                 "--phases", "examples,fuzzing", "--max-examples", "15",
                 "--exclude-method", "PUT", "--exclude-path-regex", "/(append|export|erase)$",
                 env={"SCHEMATHESIS_HOOKS": str(HOOKS), "MEMPLANE_FUZZ_LOG": str(log),
                      "MEMPLANE_FUZZ_TENANT_ONE": json.dumps(ids)})
    _passed(result)
    # Every route that takes an id was tried with the first tenant's ids, and refused.
    checked = [json.loads(line) for line in log.read_text().splitlines()]
    tried = {(method, path) for method, path, _, named in checked if named}
    assert ID_ROUTES <= tried, ID_ROUTES - tried
    assert {status for method, path, status, named in checked
            if (method, path) in ID_ROUTES} == {404}
    # The first tenant still has all of it.
    user = seen["user"]
    with deployment.http() as http:
        assert http.get(f"/v1/memories/user/{user}/profile").json()["value"] == {"name": "Ada"}
        assert http.get(f"/v1/memories/user/{user}/notes").json()["value"] == ["n1"]
        assert [http.get(f"/v1/jobs/{j}").json()["state"] for j in ids["job_ids"]] == [
            "completed", "completed"]
        assert http.get(f"/v1/receipts/{ids['receipt_ids'][0]}").status_code == 200
        assert http.get(f"/v1/exports/{ids['job_ids'][0]}/download").status_code == 200
        assert http.get(f"/v1/events/{ids['event_ids'][0]}").json()["body"] == "Ada called."
        assert http.get(f"/v1/entries/{ids['entry_ids'][0]}").json()["summary"] == (
            "Prefers email.")
    with httpx.Client(base_url=deployment.server.base_url,
                      headers={"Authorization": f"Bearer {seen['agent_key']}"}) as agent:
        assert agent.get(f"/v1/memories/user/{user}/profile").status_code == 200
