"""The compactor case of ``python -m bench``: 100,000 events in 1,000 buckets (all older than
90 days, bodies encrypted in a local bucket, SQLite), compacted with the offline summariser.

Reported: the run's wall time against the floor — reading the same event bodies once,
hash-verified, bucket by bucket (``events.read_bodies``), the best of two readings — its
process CPU time against the floor's, and the growth of the process's
peak RSS during the run (bar: < 200 MiB), sampled from /proc every 20 ms.
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select

from control_plane.audit import service as audit
from control_plane.compactor import service as compactor
from control_plane.compactor.repository import Bucket, bucket_events
from control_plane.db.base import new_id, utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import MemoryEvent, MemoryPointer
from control_plane.events import service as events
from control_plane.identity import Actor
from control_plane.keys import subject_keys as keys
from control_plane.kit import sha256_hex
from control_plane.memories.api import serialise
from control_plane.memories.shared import keyring_of
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant

_WORDS = ("campaign", "budget", "Acme", "ROAS", "Meta", "creative", "audience", "retargeting",
          "agency", "pilot", "quarter", "renewal", "pricing", "launch", "funnel", "lead")
_SENTENCES = (
    "We agreed to move {n}% of the {w} spend to {W} from next week.",
    "{W} decided the {w} review happens every Tuesday.",
    "The team discussed the {w} and the {w2} at length without a conclusion.",
    "Maria will send the {w} report by Friday; the target is {n}k.",
    "Some small talk about the weekend and the weather.",
    "The {w} numbers looked flat, {n} points below plan.",
)


def _body(rng: random.Random) -> str:
    lines = ["## Call summary"]
    for _ in range(rng.randint(4, 8)):
        template = rng.choice(_SENTENCES)
        lines.append("- " + template.format(n=rng.randint(2, 95), w=rng.choice(_WORDS),
                                            w2=rng.choice(_WORDS),
                                            W=rng.choice(_WORDS).capitalize()))
    return "\n".join(lines)


class _PeakRss:
    """Samples the resident set size (from /proc/self/statm) until stopped."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.base = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.base) / 2**20


def _seed(runtime: Runtime, tenant_id: Any, buckets: int, per_bucket: int) -> None:
    """A bulk path that writes what ``events.append_event`` writes — each body serialised,
    sealed under the scope's subject key at its time-sharded path and put into the bucket,
    one row per event — with the puts in parallel and one INSERT per bucket."""
    rng = random.Random(11)
    bodies = [_body(rng) for _ in range(500)]
    old = utcnow() - timedelta(days=400)
    ring = keyring_of(runtime.plane)

    def write(b: int) -> None:
        ref = f"ent_{b:05d}"
        with runtime.sessions() as session:
            target = runtime.plane.active(session, tenant_id)
            key = (keys.key_for_write(session, ring, tenant_id,
                                      keys.subject_of("entity", ref, None))
                   if ring.enabled else None)
            session.commit()
            rows = []
            for i in range(per_bucket):
                event_id, occurred = new_id(), old + timedelta(hours=i)
                payload = serialise(bodies[(b * per_bucket + i) % 500])
                path = target.path(events.object_path("entity", ref, occurred, event_id))
                target.adapter.put(path, keys.seal_object(ring, tenant_id, key, path, event_id,
                                                          payload))
                rows.append(dict(
                    id=event_id, tenant_id=tenant_id, scope_type="entity", scope_ref=ref,
                    kind="call_summary", source="call", occurred_at=occurred,
                    storage_config_id=target.config_id, storage_path=path,
                    content_sha256=sha256_hex(payload), content_size=len(payload),
                    sync_status="synced", created_at=utcnow()))
            begin_write(session)
            session.execute(insert(MemoryEvent), rows)
            session.commit()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(buckets)))


def _read_once(runtime: Runtime, tenant_id: Any, buckets: int, per_bucket: int) -> int:
    total = 0
    cutoff = utcnow()
    with runtime.sessions() as session:
        for b in range(buckets):
            bucket = Bucket("entity", f"ent_{b:05d}", per_bucket)
            rows = bucket_events(session, tenant_id, bucket, cutoff=cutoff, limit=per_bucket)
            bodies = events.read_bodies(session, runtime.plane, tenant_id, rows)
            total += sum(len(body) for body in bodies.values())
    return total


def run(*, quick: bool = False) -> dict[str, dict[str, Any]]:
    buckets, per_bucket = (100, 100) if quick else (1_000, 100)
    n = buckets * per_bucket
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(Settings(data_dir=Path(tmp), sqlite_synchronous="NORMAL",
                                   compactor_schedule="off"))
        runtime.migrate()
        try:
            with runtime.sessions() as session:
                tenant, _ = create_tenant(session, "bench")
            started = time.perf_counter()
            _seed(runtime, tenant.id, buckets, per_bucket)
            seed_s = time.perf_counter() - started
            with runtime.sessions() as session:
                audit.seal_all(session)  # what a running server's sealer has done by now

            # The floor twice, its best kept: one load spike on a shared machine during a
            # single reading would make the ratio flatter the compaction.
            reads: list[tuple[float, float]] = []
            for _ in range(2):
                started, cpu = time.perf_counter(), time.process_time()
                body_bytes = _read_once(runtime, tenant.id, buckets, per_bucket)
                reads.append((time.perf_counter() - started, time.process_time() - cpu))
            read_s, read_cpu = min(r[0] for r in reads), min(r[1] for r in reads)
            with runtime.sessions() as session:
                audit.seal_all(session)

            with _PeakRss() as rss, runtime.sessions() as session:
                started, cpu = time.perf_counter(), time.process_time()
                counts = compactor.compact_tenant(
                    session, runtime.plane, runtime.settings, tenant.id,
                    actor=Actor(tenant.id, "system", "bench"))
                compact_s = time.perf_counter() - started
                compact_cpu = time.process_time() - cpu
            with runtime.sessions() as session:
                left = session.scalar(select(func.count()).select_from(MemoryEvent).where(
                    MemoryEvent.compressed_at.is_(None)))
                written = session.scalar(select(func.count()).select_from(MemoryPointer)
                                         .where(MemoryPointer.source == "compactor"))
        finally:
            runtime.close()
    assert counts.events_compressed == n and left == 0 and written == buckets, counts
    name = f"compactor/{n}_events_{buckets}_buckets"
    print(f"{name}: seeded in {seed_s:.1f} s ({n / seed_s:,.0f} events/s); "
          f"bodies read once in {read_s:.1f} s ({body_bytes / 2**20:.1f} MiB; best of "
          f"{', '.join(f'{r[0]:.1f}' for r in reads)} s); "
          f"compaction {compact_s:.1f} s = {compact_s / read_s:.2f}x the read "
          f"(process CPU {compact_cpu:.1f} s = {compact_cpu / read_cpu:.2f}x the read's); "
          f"peak RSS growth {rss.growth_mib:.1f} MiB")
    return {
        f"{name}/seconds": {
            "memplane": round(compact_s, 2), "floor": round(read_s, 2), "peer": None,
            "unit": f"s (floor = reading the same bodies once, best of two; ratio "
                    f"{compact_s / read_s:.2f}, bar 2.0; CPU ratio "
                    f"{compact_cpu / read_cpu:.2f})"},
        f"{name}/peak_rss_growth": {
            "memplane": round(rss.growth_mib, 1), "floor": None, "peer": None,
            "unit": "MiB of peak RSS growth during the run (bar 200)"},
    }
