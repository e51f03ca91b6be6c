"""The compliance cases of ``python -m bench``: erasing a subject on S3 (moto) against the
adapter's own ``delete_many`` of the same objects (the floor; the naive one-delete-per-object
loop is reported beside it), and exporting a large subject with bounded memory to a local
bucket and to S3 (moto), GCS (fake-gcs-server) and Azure (Azurite) — the export job runs in
a process of its own, whose peak RSS is the one reported (``python -m bench.compliance
export-job DATA_DIR [BUCKET_URL]``); ``python -m bench.compliance export BACKEND ITEMS`` runs
one case alone."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from control_plane.addresses import MemoryAddress, Scope
from control_plane.audit import service as audit
from control_plane.compliance import service as compliance
from control_plane.db.models import Job
from control_plane.identity import Actor
from control_plane.job_handlers import JobWorker
from control_plane.keys import subject_keys
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant
from storage_adapters import envelope
from tests.support.emulators import MotoServer, new_s3_bucket

from . import export_floor


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


def _worker(runtime: Runtime) -> JobWorker:
    return JobWorker(runtime.sessions, runtime.plane, runtime.settings)


def _run_job(runtime: Runtime, job_id: Any, worker: JobWorker | None = None) -> dict[str, Any]:
    (worker or _worker(runtime)).run_once()
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
                paths = [f"tenants/{tenant.id}/floor/{i}.json" for i in range(n)]
                _put_all(adapter, paths)
                adapter.stats.reset()
                started = time.perf_counter()
                adapter.delete_many(paths)
                floor_s = time.perf_counter() - started
                floor_total = adapter.stats.total
                paths = [f"tenants/{tenant.id}/naive/{i}.json" for i in range(n)]
                _put_all(adapter, paths)
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
        f"erase/s3/{n}_objects/seconds": {
            "memplane": round(erase_s, 2), "floor": round(floor_s, 2), "peer": None,
            "naive": round(naive_s, 2),
            "unit": "s (floor = the adapter's delete_many of as many objects; naive = one "
                    "delete per object)"},
        f"erase/s3/{n}_objects/delete_requests": {
            "memplane": erase_deletes, "floor": floor_total, "peer": None,
            "naive": naive_total,
            "unit": f"requests (all requests of the erasure: {erase_total}; floor = "
                    "delete_many's)"},
    }


def _put_all(adapter: Any, paths: list[str]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: adapter.put(p, b"{}"), paths))


RSS_BAR_MIB = 100  # an export's peak RSS grows by less than this, at 1 GiB


def _emulator(backend: str) -> Any:
    from tests.support.emulators import Azurite, FakeGcsServer

    return {"s3": MotoServer, "gcs": FakeGcsServer, "azure": Azurite}[backend]()


def _bucket_url(backend: str, emulator: Any) -> str:
    config = emulator.config(f"export-{os.urandom(4).hex()}")
    name = config.pop("bucket", None) or config.pop("container")
    emulator.create_bucket(name)
    scheme = {"s3": "s3", "gcs": "gs", "azure": "az"}[backend]
    return f"{scheme}://{name}?{urlencode(config)}"


def export_case(items: int, mib: int = 1, backend: str = "local") -> dict[str, dict[str, Any]]:
    """Export ``items`` values of ``mib`` MiB to a bucket on ``backend`` (``local``, or
    ``s3``/``gcs``/``azure`` on moto, fake-gcs-server, Azurite): throughput against raw
    sequential adapter reads, and the export process's peak RSS growth against the bar."""
    emulator = None if backend == "local" else _emulator(backend)
    if emulator is not None:
        emulator.start()
    try:
        return _export_case(items, mib, backend, emulator)
    finally:
        if emulator is not None:
            emulator.stop()


def _export_case(items: int, mib: int, backend: str, emulator: Any
                 ) -> dict[str, dict[str, Any]]:
    url = None if emulator is None else _bucket_url(backend, emulator)
    jobs: list[dict[str, Any]] = []
    floors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        runtime = _runtime(tmp, url)
        try:
            with runtime.sessions() as session:
                tenant, _ = create_tenant(session, "bench")
            actor = Actor(tenant.id, "api", "bench")
            text = os.urandom(mib * 2**19).hex()  # mib MiB of JSON text each
            _fill(runtime, actor, items, lambda i: {"i": i, "text": text},
                  threads=4 if emulator is None else 16)
            pointers: list[Any] = []
            with runtime.sessions() as session:
                cursor = None
                while True:
                    page, cursor = memories.list_pointers(
                        session, actor, scope="user", scope_ref="subject", user_id=None,
                        memory_type=None, sync_status=None, cursor=cursor, limit=1000)
                    pointers += page
                    if cursor is None:
                        break
                adapter = runtime.plane.active(session, tenant.id).adapter
            paths = [p.storage_path for p in pointers]
            started = time.perf_counter()
            raw_bytes = sum(len(adapter.get(p)) for p in paths)
            raw_s = time.perf_counter() - started
            same_work = None if emulator is not None else _same_work(
                runtime, tenant.id, adapter, [(p.storage_path, p.id, p.content_sha256)
                                              for p in pointers])
            # Rounds in a rotating order (the export first, then the comparator first, …);
            # the ratio is the median of per-round ratios, as the other cases take it.
            for round_ in range(EXPORT_ROUNDS if same_work is not None else 1):
                if same_work is not None and round_ % 2:
                    floors.append(same_work())
                with runtime.sessions() as session:
                    compliance.start_export(session, actor, "subject", "json")
                runtime.close()  # the job's process has the data directory to itself
                jobs.append(_export_in_own_process(tmp, url))
                runtime = _runtime(tmp, url)
                if same_work is not None and not round_ % 2:
                    floors.append(same_work())
        finally:
            runtime.close()
    total_mib = raw_bytes / 2**20
    name = f"export/{items}x{mib}MiB" if backend == "local" else \
        f"export/{backend}/{items}x{mib}MiB"
    growth = round(max(job["peak_mib"] - job["rss_before_mib"] for job in jobs), 1)
    speeds = [total_mib / job["seconds"] for job in jobs]
    rows: dict[str, dict[str, Any]] = {}
    if floors:
        rows[f"{name}/throughput"] = {
            "memplane": round(statistics.median(speeds), 1),
            "floor": round(statistics.median(total_mib / s for s in floors), 1),
            "peer": None, "rounds": len(jobs),
            "vs_same_work": {"median": round(statistics.median(
                f / j["seconds"] for f, j in zip(floors, jobs, strict=True)), 3)},
            "unit": f"MiB/s (median of {len(jobs)} rounds; floor = a minimal script doing "
                    "the same crypto and packing work on the same cores, bench/export_floor.py)"}
    rows[f"{name}/raw_reads"] = {
        "memplane": round(statistics.median(speeds), 1), "floor": round(total_mib / raw_s, 1),
        "peer": None, "unit": "MiB/s (floor = raw sequential adapter reads; information)"}
    rows[f"{name}/peak_rss_growth"] = {
        "memplane": growth, "floor": None, "peer": None, "bar": RSS_BAR_MIB,
        "meets_bar": growth < RSS_BAR_MIB,
        "rss_before_mib": round(jobs[0]["rss_before_mib"], 1),
        "peak_mib": round(max(job["peak_mib"] for job in jobs), 1),
        "data_mib": round(total_mib),
        "unit": f"MiB (the export process's peak RSS (VmHWM) over its RSS before the "
                f"job, the largest of {len(jobs)} rounds; bar < {RSS_BAR_MIB}; archive "
                f"{jobs[0]['size'] / 2**20:.0f} MiB)"}
    return rows


EXPORT_ROUNDS = 3  # local bucket; an emulator's export (no throughput bar) runs once


def _same_work(runtime: Runtime, tenant_id: Any, adapter: Any,
               items: list[tuple[str, Any, str]]) -> Callable[[], float]:
    """The comparator (``export_floor``) over the same objects: a function timing one run.
    The subject key is unwrapped once, here, as the export unwraps it once per job."""
    header = envelope.read_header(adapter.get(items[0][0]))
    with runtime.sessions() as session:
        assert runtime.plane.keys is not None
        key = subject_keys.key_to_open(session, runtime.plane.keys, tenant_id, header.key_id)
    out_dir = str(adapter.root)
    return lambda: export_floor.run(adapter, tenant_id, header.key_id, key, items,
                                    out_dir)["seconds"]


def _export_in_own_process(data_dir: str, bucket_url: str | None = None) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.compliance", "export-job", data_dir,
                           *([bucket_url] if bucket_url else [])],
                          capture_output=True, text=True, timeout=3600,
                          cwd=Path(__file__).resolve().parent.parent)
    if done.returncode != 0:
        raise RuntimeError(f"the export process failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    """This process's peak RSS (VmHWM): that of its own address space. Not ``ru_maxrss``,
    which Linux carries over ``execve`` — and ``subprocess`` starts this process with
    ``vfork``, so it began at the *parent's* peak: the bench driver's own few hundred MiB
    after the other cases, which is what made an export look like it grew by 157 MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def export_job(data_dir: str, bucket_url: str | None = None) -> dict[str, Any]:
    """Run the queued export job of ``data_dir``; its time and this process's memory."""
    runtime = _runtime(data_dir, bucket_url)
    try:
        with runtime.sessions() as session:
            job_id = session.query(Job.id).filter(Job.state == "queued").one()[0]
        worker = _worker(runtime)  # a running worker has its job modules imported
        before = _rss_mib()
        started = time.perf_counter()
        result = _run_job(runtime, job_id, worker)
        seconds = time.perf_counter() - started
        peak = _peak_mib()
    finally:
        runtime.close()
    return {"seconds": seconds, "rss_before_mib": before, "peak_mib": peak,
            "size": int(result.get("size", 0))}


EXPORT_BACKENDS = ("local", "s3", "gcs", "azure")

if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "export-job":
        print(json.dumps(export_job(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)))
    elif len(sys.argv) == 4 and sys.argv[1] == "export" and sys.argv[2] in EXPORT_BACKENDS:
        print(json.dumps(export_case(int(sys.argv[3]), backend=sys.argv[2])))
    else:
        raise SystemExit("usage: python -m bench.compliance export-job DATA_DIR [BUCKET_URL]"
                         " | export {local,s3,gcs,azure} ITEMS")
