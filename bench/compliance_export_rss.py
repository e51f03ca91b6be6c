"""Peak memory of exporting a large data subject: 1,000 values of 1 MiB (~1 GiB), local bucket.

    .venv/bin/python -m bench.compliance_export_rss [--items 1000] [--mib 1]

Writes the memories at the service level, runs the export job with a worker in this process,
and prints the peak RSS before and after the export (``ru_maxrss``), the archive size and
the time taken. Not a test: a figure to watch.
"""

from __future__ import annotations

import argparse
import base64
import os
import resource
import tempfile
import time
from pathlib import Path

from control_plane.audit.service import Actor
from control_plane.compliance import service as compliance
from control_plane.jobs.worker import Worker
from control_plane.memories import service as memories
from control_plane.memories.addresses import MemoryAddress, Scope
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant


def _random_text(size: int) -> str:
    """Incompressible, so the archive is as large as the data (deflate gains nothing)."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--mib", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(Settings(data_dir=Path(tmp), sqlite_synchronous="NORMAL"))
        runtime.migrate()
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "bench")
        actor = Actor(tenant.id, "api", "bench")
        size = int(args.mib * 1024 * 1024 - 16)
        started = time.perf_counter()
        with runtime.sessions() as session:
            for i in range(args.items):
                memories.set_value(session, runtime.plane, actor,
                                   MemoryAddress.parse(Scope.user, "subject", f"k{i}"),
                                   _random_text(size), MemoryMeta())
        wrote = time.perf_counter() - started
        before = peak_mib()
        with runtime.sessions() as session:
            job = compliance.start_export(session, actor, "subject", "json")
        started = time.perf_counter()
        Worker(runtime.sessions, runtime.plane, runtime.settings).run_once()
        took = time.perf_counter() - started
        with runtime.sessions() as session:
            from control_plane.db.models import Job

            done = session.get(Job, job.id)
            assert done is not None and done.state == "completed", done and done.error
            result = done.result or {}
        after = peak_mib()
        runtime.close()
    total = args.items * args.mib
    print(f"wrote {args.items} x {args.mib} MiB = {total:.0f} MiB in {wrote:.1f} s")
    print(f"export: {result['counts']['exported']} items, archive {result['size'] / 2**20:.0f}"
          f" MiB, {took:.1f} s ({total / took:.0f} MiB/s)")
    print(f"peak RSS before export {before:.0f} MiB, after export {after:.0f} MiB "
          f"(export added {after - before:.0f} MiB)")


if __name__ == "__main__":
    main()
