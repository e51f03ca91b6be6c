"""Erasing a subject with 10,000 objects on S3 (moto server), against a naive loop that
deletes one object per request — both in the same run, on the same server.

    .venv/bin/python -m bench.compliance_erase_moto [--objects 10000]

Prints wall time and the object-store requests by kind (``adapter.stats``) of each.
Not a test: figures to watch.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    moto = MotoServer()
    moto.start()
    try:
        config = new_s3_bucket(moto)
        bucket = config.pop("bucket")
        url = f"s3://{bucket}?{urlencode(config)}"
        with tempfile.TemporaryDirectory() as tmp:
            runtime = Runtime(Settings(data_dir=Path(tmp), default_bucket_url=url,
                                       sqlite_synchronous="NORMAL"))
            runtime.migrate()
            try:
                run(runtime, args.objects, args.threads)
            finally:
                runtime.close()
    finally:
        moto.stop()


def run(runtime: Runtime, n: int, threads: int) -> None:
    with runtime.sessions() as session:
        tenant, _ = create_tenant(session, "bench")
    actor = Actor(tenant.id, "api", "bench")

    def write(i: int) -> None:
        with runtime.sessions() as session:
            memories.set_value(session, runtime.plane, actor,
                               MemoryAddress.parse(Scope.user, "subject", f"k{i}"),
                               {"i": i}, MemoryMeta())

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, range(n)))
    print(f"wrote {n} memories in {time.perf_counter() - started:.1f} s")
    adapter = runtime.plane.default_adapter

    adapter.stats.reset()
    with runtime.sessions() as session:
        job = compliance.start_erasure(session, actor, "subject", dry_run=False)
    started = time.perf_counter()
    Worker(runtime.sessions, runtime.plane, runtime.settings).run_once()
    erase_s = time.perf_counter() - started
    with runtime.sessions() as session:
        done = session.get(Job, job.id)
        assert done is not None and done.state == "completed", done and done.error
        counts = (done.result or {})["counts"]
    erase_requests = dict(adapter.stats.counts)
    print(f"erasure job: {erase_s:.2f} s, {sum(erase_requests.values())} requests "
          f"{erase_requests}; receipt counts {counts}")

    paths = [f"tenants/{tenant.id}/naive/{i}.json" for i in range(n)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda p: adapter.put(p, b'{"i":0}'), paths))
    adapter.stats.reset()
    started = time.perf_counter()
    for path in paths:
        adapter.delete_many([path])
    naive_s = time.perf_counter() - started
    naive_requests = dict(adapter.stats.counts)
    print(f"naive loop: {naive_s:.2f} s, {sum(naive_requests.values())} requests "
          f"{naive_requests}")
    print(f"ratio: erasure is {naive_s / erase_s:.1f}x faster with "
          f"{sum(naive_requests.values()) / max(1, sum(erase_requests.values())):.0f}x "
          f"fewer requests")


if __name__ == "__main__":
    main()
