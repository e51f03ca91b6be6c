"""The compliance cases of ``python -m bench``: erasing a subject on S3 (moto) against a
naive one-delete-per-object loop, and exporting a large subject with bounded memory."""

from __future__ import annotations

import os
import resource
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from control_plane.audit import service as audit
from control_plane.audit.service import Actor
from control_plane.compliance import service as compliance
from control_plane.db.models import Job
from control_plane.jobs.worker import Worker
from control_plane.memories import service as memories
from control_plane.memories.addresses import MemoryAddress, Scope
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant
from tests.support.emulators import MotoServer, new_s3_bucket


def _runtime(tmp: str, bucket_url: str | None = None) -> Runtime:
    runtime = Runtime(Settings(data_dir=Path(tmp), default_bucket_url=bucket_url,
                               sqlite_synchronous="NORMAL"))
    runtime.migrate()
    return runtime


def _fill(runtime: Runtime, actor: Actor, n: int, value: Any, threads: int = 16) -> None:
    def write(i: int) -> None:
        with runtime.sessions() as session:
            memories.set_value(session, runtime.plane, actor,
                               MemoryAddress.parse(Scope.user, "subject", f"k{i}"),
                               value(i) if callable(value) else value, MemoryMeta())

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, range(n)))


def _run_job(runtime: Runtime, job_id: Any) -> dict[str, Any]:
    Worker(runtime.sessions, runtime.plane, runtime.settings).run_once()
    with runtime.sessions() as session:
        done = session.get(Job, job_id)
        assert done is not None and done.state == "completed", done and done.error
        return dict(done.result or {})


def erase_case(n: int) -> dict[str, dict[str, Any]]:
    moto = MotoServer()
    moto.start()
    try:
        config = new_s3_bucket(moto)
        url = f"s3://{config.pop('bucket')}?{urlencode(config)}"
        with tempfile.TemporaryDirectory() as tmp:
            runtime = _runtime(tmp, url)
            try:
                with runtime.sessions() as session:
                    tenant, _ = create_tenant(session, "bench")
                actor = Actor(tenant.id, "api", "bench")
                _fill(runtime, actor, n, {"v": 1})
                adapter = runtime.plane.default_adapter
                adapter.stats.reset()
                with runtime.sessions() as session:
                    audit.seal_all(session)  # what a running server's sealer has done by now
                    job = compliance.start_erasure(session, actor, "subject", dry_run=False)
                started = time.perf_counter()
                _run_job(runtime, job.id)
                erase_s = time.perf_counter() - started
                erase_deletes = adapter.stats.counts["delete_batch"]
                erase_total = adapter.stats.total
                paths = [f"tenants/{tenant.id}/naive/{i}.json" for i in range(n)]
                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda p: adapter.put(p, b"{}"), paths))
                adapter.stats.reset()
                started = time.perf_counter()
                for path in paths:
                    adapter.delete_many([path])
                naive_s = time.perf_counter() - started
                naive_total = adapter.stats.total
            finally:
                runtime.close()
    finally:
        moto.stop()
    return {
        f"erase/s3/{n}_objects/seconds": {"memplane": round(erase_s, 2),
                                          "floor": round(naive_s, 2), "peer": None,
                                          "unit": "s (floor = naive per-object delete loop)"},
        f"erase/s3/{n}_objects/delete_requests": {
            "memplane": erase_deletes, "floor": naive_total, "peer": None,
            "unit": f"requests (all requests of the erasure: {erase_total})"},
    }


def export_case(items: int, mib: int = 1) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = _runtime(tmp)
        try:
            with runtime.sessions() as session:
                tenant, _ = create_tenant(session, "bench")
            actor = Actor(tenant.id, "api", "bench")
            text = os.urandom(mib * 2**20 * 3 // 8).hex()  # ~mib MiB of JSON text each
            _fill(runtime, actor, items, lambda i: {"i": i, "text": text}, threads=4)
            with runtime.sessions() as session:
                paths = [p.storage_path for p in memories.list_pointers(
                    session, actor, scope="user", scope_ref="subject", user_id=None,
                    memory_type=None, sync_status=None, cursor=None, limit=1000)[0]]
                adapter = runtime.plane.active(session, tenant.id).adapter
            started = time.perf_counter()
            raw_bytes = sum(len(adapter.get(p)) for p in paths)
            raw_s = time.perf_counter() - started
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            with runtime.sessions() as session:
                job = compliance.start_export(session, actor, "subject", "json")
            started = time.perf_counter()
            result = _run_job(runtime, job.id)
            export_s = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        finally:
            runtime.close()
    total_mib = raw_bytes / 2**20
    return {
        f"export/{items}x{mib}MiB/throughput": {
            "memplane": round(total_mib / export_s, 1), "floor": round(total_mib / raw_s, 1),
            "peer": None, "unit": "MiB/s (floor = raw sequential adapter reads)"},
        f"export/{items}x{mib}MiB/peak_rss_growth": {
            "memplane": round(after - before, 1), "floor": None, "peer": None,
            "unit": f"MiB of peak RSS growth (archive {result.get('size', 0) / 2**20:.0f} MiB)"},
    }
