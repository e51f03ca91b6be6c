"""The metrics worth alerting on, scraped from /metrics after causing each event.

The server here runs without its background threads (no sealer, no job worker), so every
storage call, job and audit row comes from the test itself and the increments are exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from control_plane.integrity import reconcile
from control_plane.job_handlers import JobWorker
from control_plane.runtime import Runtime
from tests.support.emulators import free_port
from tests.support.process import CHECKOUT
from tests.support.service import ServerThread, Stack, Tenant, isolated_database, make_settings

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def quiet_stack(database: str, request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server without background work, on a database of its own: another server's job
    worker on a shared database could claim this stack's jobs without its key ring."""
    data_dir = tmp_path_factory.mktemp("metrics")
    url = isolated_database(database, request)
    settings = make_settings(url, data_dir, run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


def scrape(stack: Stack) -> Samples:
    with httpx.Client(base_url=stack.base_url, timeout=30) as http:
        response = http.get("/metrics")
    assert response.status_code == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def runtime_of(stack: Stack) -> Runtime:
    return stack.runtime


def test_request_latency_per_route_template(quiet_stack: Stack) -> None:
    tenant = quiet_stack.new_tenant()
    route = "/v1/memories/{scope}/{scope_ref}/{key}"
    before = scrape(quiet_stack)
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get("/v1/memories/user/u1/missing-1").status_code == 404
        assert http.get("/v1/memories/user/u2/missing-2").status_code == 404
        assert http.get("/no/such/route").status_code == 404
    after = scrape(quiet_stack)

    latency = "memplane_http_request_duration_seconds_count"
    assert value(after, latency, method="GET", route=route) - \
        value(before, latency, method="GET", route=route) == 2  # one series per template
    assert value(after, latency, method="GET", route="unmatched") - \
        value(before, latency, method="GET", route="unmatched") == 1
    requests = "memplane_http_requests_total"
    assert value(after, requests, method="GET", route=route, status="404") - \
        value(before, requests, method="GET", route=route, status="404") == 2


def test_storage_calls_are_timed_per_backend_and_operation(quiet_stack: Stack) -> None:
    tenant = quiet_stack.new_tenant()
    before = scrape(quiet_stack)
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="v")
        client.memory.get(scope="user", scope_ref="u1", key="k")
    after = scrape(quiet_stack)

    count = "memplane_storage_operation_duration_seconds_count"
    assert value(after, count, backend="local", operation="put") - \
        value(before, count, backend="local", operation="put") == 1
    assert value(after, count, backend="local", operation="get") - \
        value(before, count, backend="local", operation="get") == 1
    total = "memplane_storage_operation_duration_seconds_sum"
    assert value(after, total, backend="local", operation="put") > \
        value(before, total, backend="local", operation="put")


def test_a_batch_of_sets_stores_its_objects_in_one_timed_put_many(quiet_stack: Stack) -> None:
    tenant = quiet_stack.new_tenant()
    with tenant.client() as client:  # the subject's key exists: the batch takes its fast path
        client.memory.set(scope="user", scope_ref="u1", key="first", value=0)
    before = scrape(quiet_stack)
    with tenant.client() as client:
        written = client.memory.set_many([
            {"scope": "user", "scope_ref": "u1", "key": f"k{i}", "value": i} for i in range(3)])
    after = scrape(quiet_stack)

    assert [r.status for r in written] == [200, 200, 200]
    count = "memplane_storage_operation_duration_seconds_count"
    assert value(after, count, backend="local", operation="put_many") - \
        value(before, count, backend="local", operation="put_many") == 1
    assert value(after, count, backend="local", operation="put") - \
        value(before, count, backend="local", operation="put") == 0
    assert len(tenant.objects()) == 4


def test_storage_failures_are_counted_by_problem(quiet_stack: Stack) -> None:
    tenant = quiet_stack.new_tenant()
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="gone", value="v")
    for path in tenant.objects():
        path.unlink()  # the object vanishes from the bucket behind the control plane's back
    before = scrape(quiet_stack)
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.get("/v1/memories/user/u1/gone")
    after = scrape(quiet_stack)

    assert response.status_code == 409, response.text
    errors = "memplane_storage_errors_total"
    assert value(after, errors, backend="local", operation="get", problem="not_found") - \
        value(before, errors, backend="local", operation="get", problem="not_found") == 1
    assert {k for k in after if k[0] == errors} - {k for k in before if k[0] == errors} <= {
        (errors, frozenset({"backend": "local", "operation": "get",
                            "problem": "not_found"}.items()))}


def test_queue_depth_and_job_durations(quiet_stack: Stack) -> None:
    tenant = quiet_stack.new_tenant()
    runtime = runtime_of(quiet_stack)
    queued_before = value(scrape(quiet_stack), "memplane_jobs", kind="export", state="queued")
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="subject-1", key="k", value="v")
        client.memory.export(user_id="subject-1")
        client.memory.export(user_id="subject-2")
    middle = scrape(quiet_stack)
    assert value(middle, "memplane_jobs", kind="export", state="queued") - queued_before == 2
    assert value(middle, "memplane_database_metrics_up") == 1

    worker = JobWorker(runtime.sessions, runtime.plane, runtime.settings)
    ran = [worker.run_once() for _ in range(2)]
    assert all(isinstance(job_id, uuid.UUID) for job_id in ran)
    after = scrape(quiet_stack)

    assert value(after, "memplane_jobs", kind="export", state="queued") == queued_before
    done = "memplane_job_duration_seconds_count"
    assert value(after, done, kind="export", outcome="completed") - \
        value(middle, done, kind="export", outcome="completed") == 2


def test_audit_sealing_lag_is_reported_until_the_sealer_catches_up(quiet_stack: Stack) -> None:
    from sqlalchemy import update

    from control_plane.audit import service as audit
    from control_plane.db.base import utcnow
    from control_plane.db.models import AccessLog

    runtime = runtime_of(quiet_stack)
    tenant = quiet_stack.new_tenant()
    with runtime.sessions() as session:
        audit.seal_all(session)
    sealed = scrape(quiet_stack)
    assert value(sealed, "memplane_audit_unsealed_rows") == 0
    assert value(sealed, "memplane_audit_unsealed_oldest_age_seconds") == 0

    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="v")
    with runtime.sessions.begin() as session:  # the sealer has been stuck for an hour
        stuck = session.execute(update(AccessLog).where(AccessLog.seq.is_(None))
                                .values(accessed_at=utcnow() - timedelta(hours=1))).rowcount
    waiting = scrape(quiet_stack)
    assert stuck >= 1  # the write's own row, and whatever else the write audited
    assert value(waiting, "memplane_audit_unsealed_rows") == stuck
    assert 3600 <= value(waiting, "memplane_audit_unsealed_oldest_age_seconds") < 3600 + 300

    with runtime.sessions() as session:
        audit.seal_all(session)
    caught_up = scrape(quiet_stack)
    assert value(caught_up, "memplane_audit_unsealed_rows") == 0
    assert value(caught_up, "memplane_audit_unsealed_oldest_age_seconds") == 0


def test_reconcile_counts_and_the_pending_pointers_it_settles(quiet_stack: Stack) -> None:
    from sqlalchemy import update

    from control_plane.db.base import utcnow
    from control_plane.db.models import MemoryPointer

    tenant = quiet_stack.new_tenant()
    runtime = runtime_of(quiet_stack)
    with tenant.client() as client:
        pointer = client.memory.set(scope="user", scope_ref="u1", key="k", value="v")
    clean = scrape(quiet_stack)
    assert value(clean, "memplane_pointers_unsettled", sync_status="pending_delete") == 0
    assert value(clean, "memplane_pointers_pending_oldest_age_seconds") == 0
    with runtime.sessions.begin() as session:  # what a crash mid-delete leaves behind
        session.execute(
            update(MemoryPointer).where(MemoryPointer.id == uuid.UUID(str(pointer.id)))
            .values(sync_status="pending_delete", updated_at=utcnow() - timedelta(hours=1)))
    before = scrape(quiet_stack)
    assert value(before, "memplane_pointers_unsettled", sync_status="pending_delete") == 1
    assert value(before, "memplane_pointers_pending_oldest_age_seconds") >= 3600

    with runtime.sessions() as session:
        settled = reconcile.reconcile(session, runtime.plane, grace_seconds=0,
                                      tenant_id=tenant.id)
    after = scrape(quiet_stack)

    assert (settled.writes_completed, settled.writes_rolled_back,
            settled.deletes_completed) == (0, 0, 1)
    actions = "memplane_reconcile_actions_total"
    for action, expected in (("write_completed", 0), ("write_rolled_back", 0),
                             ("delete_completed", 1)):
        assert value(after, actions, action=action) - \
            value(before, actions, action=action) == expected
    assert value(after, "memplane_pointers_unsettled", sync_status="pending_delete") == 0
    assert value(after, "memplane_pointers_pending_oldest_age_seconds") == 0


def test_gc_counts_and_candidates(quiet_stack: Stack) -> None:
    tenant: Tenant = quiet_stack.new_tenant()
    runtime = runtime_of(quiet_stack)
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="v")
    kept = tenant.objects()
    orphan: Path = kept[0].parent / f"{uuid.uuid4()}.json"
    orphan.write_bytes(b"{}")  # an object no pointer names, as a crash leaves one
    before = scrape(quiet_stack)
    with runtime.sessions() as session:
        marked = reconcile.mark_orphans(session, runtime.plane, grace_seconds=0,
                                        tenant_id=tenant.id)
    waiting = scrape(quiet_stack)
    with runtime.sessions() as session:
        swept = reconcile.sweep_orphans(session, runtime.plane, grace_seconds=0,
                                        tenant_id=tenant.id)
    after = scrape(quiet_stack)

    assert (marked.marked, swept.orphans_deleted, swept.rescued) == (1, 1, 0)
    assert not orphan.exists()
    assert value(waiting, "memplane_gc_candidates") - \
        value(before, "memplane_gc_candidates") == 1
    assert value(after, "memplane_gc_candidates") == value(before, "memplane_gc_candidates")
    objects = "memplane_gc_objects_total"
    for outcome, expected in (("marked", 1), ("deleted", 1), ("rescued", 0)):
        assert value(after, objects, outcome=outcome) - \
            value(before, objects, outcome=outcome) == expected
    assert value(waiting, objects, outcome="marked") - \
        value(before, objects, outcome="marked") == 1


def settings_env(stack: Stack) -> dict[str, str]:
    """The stack's configuration as the MEMPLANE_* variables a process of its own reads."""
    env: dict[str, str] = {}
    for name in stack.settings.model_fields_set:
        raw = getattr(stack.settings, name)
        if raw is None:
            continue
        if hasattr(raw, "get_secret_value"):
            raw = raw.get_secret_value()
        if isinstance(raw, list):
            text = json.dumps([str(item) for item in raw])
        elif isinstance(raw, bool):
            text = "true" if raw else "false"
        else:
            text = str(raw)
        env[f"MEMPLANE_{name.upper()}"] = text
    return env


def test_a_worker_process_serves_its_job_metrics(quiet_stack: Stack) -> None:
    """`memplane worker --metrics-port` (production runs jobs outside the API): its job
    durations and storage calls are scraped from the worker, behind the metrics token."""
    tenant = quiet_stack.new_tenant()
    port = free_port()
    env = {**os.environ, **settings_env(quiet_stack), "MEMPLANE_LOG_LEVEL": "WARNING",
           "MEMPLANE_METRICS_TOKEN": "worker-metrics-token-0123456789",
           "PYTHONPATH": str(CHECKOUT)}
    process = subprocess.Popen(
        [sys.executable, "-c", "from memplane.cli import main; main()", "worker",
         "--metrics-port", str(port), "--metrics-host", "127.0.0.1"],
        env=env, cwd=CHECKOUT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}/metrics"
    auth = {"Authorization": "Bearer worker-metrics-token-0123456789"}
    try:
        deadline = time.monotonic() + 60
        while True:  # until the worker's endpoint answers (it starts before the first job)
            assert process.poll() is None, f"memplane worker exited with {process.returncode}"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url, headers=auth, timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the worker's metrics never answered"
            time.sleep(0.05)
        assert httpx.get(url, timeout=5).status_code == 401
        with tenant.client() as client:
            client.memory.set(scope="user", scope_ref="subject-w", key="k", value="v")
            job = client.memory.export(user_id="subject-w")
            done = client.jobs.wait(job.id, timeout=120)
        assert done.state == "completed"
        response = httpx.get(url, headers=auth, timeout=5)
    finally:
        process.terminate()
        process.wait(timeout=30)

    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(response.text)
               for s in family.samples}
    assert value(samples, "memplane_job_duration_seconds_count",
                 kind="export", outcome="completed") == 1
    calls = {dict(labels)["operation"]: n for (name, labels), n in samples.items()
             if name == "memplane_storage_operation_duration_seconds_count" and n}
    # The subject's one memory read, its archive streamed in, the stale-archive cleanup.
    assert calls == {"get": 1, "put_file": 1, "delete_many": 1}
    # The API's database gauges are the API's to report, not each worker's.
    assert not any(name == "memplane_jobs" for name, _ in samples)
