"""Scale: verified get and list-by-scope latency with 10,000 and with 1,000,000 pointers in
PostgreSQL (bulk-loaded with COPY). The 10k figure is the floor the 1M figure is held to."""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from sqlalchemy import select

from control_plane.db.base import new_id
from control_plane.db.models import MemoryPointer
from control_plane.memories import service as memories

from .stacks import Backends, MemplaneStack

COLUMNS = ("id", "tenant_id", "scope_type", "scope_ref", "key", "memory_type", "tags",
           "importance", "source", "storage_config_id", "storage_path", "content_sha256",
           "content_size", "sync_status", "version", "has_embeddings", "created_at",
           "updated_at")


def _bulk_load(stack: MemplaneStack, count: int, start: int) -> None:
    with stack.runtime.sessions() as session:
        seed = session.scalars(select(MemoryPointer)
                               .where(MemoryPointer.tenant_id == stack.actor.tenant_id)
                               .limit(1)).one()
        config_id, tenant_id = seed.storage_config_id, seed.tenant_id
    raw = stack.runtime.engine.raw_connection()
    try:
        cursor = raw.cursor()
        columns = ", ".join(COLUMNS)
        with cursor.copy(f"COPY memory_pointers ({columns}) FROM STDIN") as copy:
            for i in range(start, start + count):
                copy.write_row((
                    new_id(), tenant_id, "user", f"s{i % 5000}", f"bulk{i}", "fact", "[]", 3,
                    "api", config_id, f"bulk/{i}.json", "0" * 64, 10, "synced", 1, False,
                    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
                ))
        raw.commit()
        cursor.execute("ANALYZE memory_pointers")
        raw.commit()
    finally:
        raw.close()


def _latency(fn: Any, n: int) -> float:
    samples = []
    for i in range(n):
        started = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _measure(stack: MemplaneStack, n: int) -> tuple[float, float]:
    get = _latency(lambda i: stack.get(f"real{i % 20}"), n)

    def list_scope(i: int) -> None:
        with stack.runtime.sessions() as session:
            rows, _ = memories.list_pointers(
                session, stack.actor, scope="user", scope_ref=f"s{i % 5000}", user_id=None,
                memory_type=None, sync_status=None, cursor=None, limit=100)
            assert rows is not None

    return get, _latency(list_scope, n)


def run(backends: Backends, *, quick: bool) -> dict[str, dict[str, Any]]:
    stack = MemplaneStack(backends, "postgres", "local")
    try:
        for i in range(20):
            stack.set(f"real{i}", {"n": i, "id": str(uuid.uuid4())})
        small, large = 10_000, 1_000_000
        _bulk_load(stack, small - 20, 0)
        n = 150 if quick else 500
        get_small, list_small = _measure(stack, n)
        _bulk_load(stack, large - small, small)
        get_large, list_large = _measure(stack, n)
    finally:
        stack.close()
    return {
        "scale/get_latency_1M_vs_10k": {"memplane": round(get_large, 3),
                                         "floor": round(get_small, 3), "peer": None,
                                         "unit": "ms (median; floor = same at 10k pointers)"},
        "scale/list_scope_latency_1M_vs_10k": {"memplane": round(list_large, 3),
                                                "floor": round(list_small, 3), "peer": None,
                                                "unit": "ms (median; floor = same at 10k)"},
    }
