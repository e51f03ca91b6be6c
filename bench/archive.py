"""The archive tier (not a test): memories moved to the colder class per second by
``control_plane.archive`` against the floor — the adapter's ``set_storage_class`` alone on
as many objects, with no database and no audit — and the cost of reading an archived memory
against a standard one (both hash-verified reads). Stacks: SQLite + local, PostgreSQL +
local, SQLite + S3 (moto).

Run ``python -m bench.archive [--quick]``; figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import uuid
from typing import Any

from sqlalchemy import select

from control_plane.archive import service as archive
from control_plane.db.models import MemoryPointer

from .stacks import Backends, MemplaneStack

STACKS = [("sqlite", "local"), ("postgres", "local"), ("sqlite", "s3")]
VALUE = {"text": "a preference worth keeping, " * 20}


def _pointer_ids(stack: MemplaneStack, prefix: str) -> list[uuid.UUID]:
    with stack.runtime.sessions() as session:
        return list(session.scalars(select(MemoryPointer.id).where(
            MemoryPointer.tenant_id == stack.actor.tenant_id,
            MemoryPointer.key.startswith(prefix))))


def _reads_per_second(stack: MemplaneStack, keys: list[str]) -> float:
    started = time.perf_counter()
    for key in keys:
        stack.get(key)
    return len(keys) / (time.perf_counter() - started)


def run(*, quick: bool) -> dict[str, dict[str, Any]]:
    n = 100 if quick else 500
    results: dict[str, dict[str, Any]] = {}
    backends = Backends()
    try:
        for database, bucket in STACKS:
            stack = MemplaneStack(backends, database, bucket)
            try:
                for i in range(n):
                    stack.set(f"arch-{i}", VALUE)
                    stack.set(f"std-{i}", VALUE)
                ids = _pointer_ids(stack, "arch-")
                with stack.runtime.sessions() as session:
                    started = time.perf_counter()
                    report = archive.archive(session, stack.runtime.plane,
                                             stack.actor.tenant_id, pointer_ids=ids)
                    took = time.perf_counter() - started
                assert report.archived == n, report
                adapter = stack.runtime.plane.default_adapter
                floor_paths = [f"floor/{uuid.uuid4().hex}.json" for _ in range(n)]
                for path in floor_paths:
                    adapter.put(path, b"x" * 600)
                started = time.perf_counter()
                for path in floor_paths:
                    adapter.set_storage_class(path, "archive")
                floor = n / (time.perf_counter() - started)
                memplane = n / took
                archived_reads = _reads_per_second(stack, [f"arch-{i}" for i in range(n)])
                standard_reads = _reads_per_second(stack, [f"std-{i}" for i in range(n)])
                name = f"archive/{database}+{bucket}"
                results[name] = {"memplane": round(memplane, 1), "floor": round(floor, 1),
                                 "peer": None, "unit": "objects archived/s"}
                results[f"{name}/reads"] = {
                    "memplane": round(archived_reads, 1), "floor": round(standard_reads, 1),
                    "peer": None, "unit": "verified reads/s, archived vs standard"}
                print(f"{name}: {memplane:,.0f} archived/s vs floor {floor:,.0f}/s "
                      f"(ratio {memplane / floor:.2f}); reads archived {archived_reads:,.0f}/s "
                      f"vs standard {standard_reads:,.0f}/s "
                      f"(ratio {archived_reads / standard_reads:.2f})")
            finally:
                stack.close()
    finally:
        backends.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.archive")
    parser.add_argument("--quick", action="store_true", help="fewer objects")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print(json.dumps(run(quick=args.quick), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
