"""Run a workload on a live server in this process while recording, then check every crash
state the log allows (``python -m tests.crashstates`` runs the larger set)."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from control_plane.audit import checkpoints
from control_plane.audit import service as audit
from control_plane.integrity import reconcile as rec
from control_plane.settings import Settings
from tests.support.service import BOOTSTRAP_KEY, ServerThread, make_settings

from . import pgsnap
from .model import crash_states
from .recorder import Commits, Log, Recorder, SqliteCommits
from .replay import SCOPE_REF, replay

# ("put", address, value) | ("delete", address) | ("gc",) | ("export", user) | ("checkpoint",)
# An address is scope/scope_ref/key.
Step = tuple[str, ...]
A, B, U = f"agent/{SCOPE_REF}/a", f"agent/{SCOPE_REF}/b", "user/crash-user/diet"

WORKLOADS: dict[str, list[Step]] = {
    "write": [("put", A, "one")],
    "overwrite": [("put", A, "one"), ("put", A, "two")],
    "delete": [("put", A, "one"), ("delete", A)],
    "gc": [("gc",)],
    "export": [("put", U, "vegetarian"), ("export", "crash-user")],
    "checkpoint": [("put", A, "one"), ("checkpoint",)],
}
LARGER: dict[str, list[Step]] = {
    "two-keys": [("put", A, "one"), ("put", B, "two")],
    "overwrite-thrice": [("put", A, "1"), ("put", A, "2"), ("put", A, "3")],
    "delete-rewrite": [("put", A, "one"), ("delete", A), ("put", A, "two")],
    "write-gc": [("put", A, "one"), ("gc",), ("put", B, "two")],
    "export-overwrite": [("put", U, "vegetarian"), ("export", "crash-user"),
                         ("put", U, "vegan"), ("checkpoint",)],
    "checkpoint-twice": [("put", A, "one"), ("checkpoint",), ("put", B, "two"),
                         ("checkpoint",)],
}


@dataclass
class Outcome:
    workload: str
    operations: int = 0
    states: int = 0
    commits: int = 0  # copies of the database the log holds
    findings: dict[str, list[str]] = field(default_factory=dict)  # finding -> crash states


def record(steps: Sequence[Step], work: Path, database: str = "sqlite"
           ) -> tuple[Log, uuid.UUID, Settings]:
    """``database``: "sqlite" (the embedded default) or the URL of a migrated PostgreSQL
    database of its own (the replays write into it afterwards)."""
    data_dir = work / "data"
    settings = make_settings(database, data_dir, audit_seal_interval_seconds=3600)
    server = ServerThread(settings).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        with httpx.Client(base_url=base, timeout=30,
                          headers={"Authorization": f"Bearer {BOOTSTRAP_KEY}"}) as admin:
            created = admin.post("/v1/tenants", json={"name": f"t-{uuid.uuid4().hex[:6]}"})
            created.raise_for_status()
            body = created.json()
        tenant_id = uuid.UUID(body["tenant"]["id"])
        runtime = server.app.state.runtime
        adapter = runtime.plane.default_adapter  # the bucket directory exists before the log
        if any(step[0] == "gc" for step in steps):
            # An object no pointer names, as a crash between put and commit leaves one.
            orphan = f"tenants/{tenant_id}/memories/agent/{SCOPE_REF}/lost/{uuid.uuid4().hex}"
            adapter.put(orphan, b"left by a crash")
            old = time.time() - 3600
            os.utime(data_dir / "bucket" / orphan, (old, old))
        os.sync()
        commits: Commits = (SqliteCommits(data_dir / "memplane.db", work / "snaps")
                            if database == "sqlite" else pgsnap.PostgresCommits(database))
        recorder = Recorder(data_dir / "bucket", commits)
        recorder.install()
        try:
            with httpx.Client(base_url=base, timeout=30, headers={
                    "Authorization": f"Bearer {body['api_key']}"}) as http:
                for step in steps:
                    _step(step, http, recorder, runtime, tenant_id)
        finally:
            recorder.uninstall()
    finally:
        server.stop()
    keep = work / "keep"
    shutil.copytree(data_dir, keep, ignore=lambda d, names: [
        n for n in names if n == "bucket" or n.startswith("memplane.db")]
        if Path(d) == data_dir else [])
    return recorder.log, tenant_id, settings


def _step(step: Step, http: httpx.Client, recorder: Recorder, runtime: Any,
          tenant_id: uuid.UUID) -> None:
    url = "/v1/memories/"
    if step[0] == "export":
        started = http.post(f"/v1/subjects/{step[1]}/export")
        assert started.status_code == 202, started.text
        job = started.json()["id"]
        deadline = time.monotonic() + 60
        while (state := http.get(f"/v1/jobs/{job}").json()["state"]) != "completed":
            assert state in ("queued", "running") and time.monotonic() < deadline, state
            time.sleep(0.05)
        recorder.mark("ack", f"export:{job}", None)
    elif step[0] == "checkpoint":
        with runtime.sessions() as session:
            audit.seal(session, tenant_id)
            assert checkpoints.anchor(session, runtime.plane, runtime.settings, tenant_id,
                                      seal=audit.seal)
        recorder.mark("ack", "checkpoint", None)
    elif step[0] == "put":
        recorder.mark("sent", step[1], step[2])
        http.put(url + step[1], json={"value": step[2]}).raise_for_status()
        recorder.mark("ack", step[1], step[2])
    elif step[0] == "delete":
        recorder.mark("sent", step[1], None)
        response = http.delete(url + step[1])
        assert response.status_code in (200, 204), response.text
        recorder.mark("ack", step[1], None)
    else:
        with runtime.sessions() as session:
            rec.collect_orphans(session, runtime.plane, grace_seconds=0)


def explore(name: str, steps: Sequence[Step], work: Path, database: str = "sqlite"
            ) -> Outcome:
    log, tenant_id, settings = record(steps, work, database)
    if database != "sqlite":
        pgsnap.without_flush_waits(database)
    outcome = Outcome(name, operations=sum(1 for op in log.ops
                                           if op.kind not in ("db", "sent", "ack")),
                      commits=len(log.snapshots))
    data_dir, keep = work / "data", work / "keep"
    for state in crash_states(log):
        outcome.states += 1
        for finding in replay(state, log, data_dir, keep, tenant_id, settings):
            outcome.findings.setdefault(finding, []).append(
                f"point {state.point}: {state.how}")
    return outcome
