"""The audit tree's cost (``python -m bench --only audit-tree``, or ``python -m
bench.audit_tree [--quick] [--rows N]`` alone, which prints its table and JSON).

- **Sealer CPU per row, with the tree and without.** Two tenants on one database: one sealed
  as the server seals (chain and tree in one transaction), one with ``seal(with_tree=False)``,
  today's chain alone. Each round adds the same rows to both (not timed) and times each
  ``seal`` — the sealer process's CPU (``time.process_time``: Python, SQLAlchemy and the
  driver; the database server's own CPU is another process) and its wall time — in a rotated
  order. Two shapes: a backlog sealed in batches of 5,000, and 50 rows per ``seal`` call (the
  running sealer at a low write rate, where each call's fixed statements weigh most). The
  figure is the median of the per-round ratios, tree ÷ chain; on PostgreSQL and SQLite.
- **Inclusion proof latency at a million rows (PostgreSQL).** A million rows are COPYed in and
  sealed by ``seal`` (its rate is reported too); then proofs of random rows against the tree
  of all of them: ``tree.inclusion`` alone (one query of the tiles, the folding),
  ``transparency.inclusion_as`` (plus the audit row, through the audit batcher), and ``GET
  /v1/audit/proof/inclusion`` from a ``memplane serve`` process, one client; p50 and p99.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
import uuid
from typing import Any

from control_plane.audit import service as audit
from control_plane.audit import transparency, tree
from control_plane.db.base import utcnow
from control_plane.db.engine import begin_write, scrub_freed
from control_plane.identity import Actor
from control_plane.runtime import Runtime
from control_plane.tenants.service import create_tenant
from control_plane.tlog import merkle

from .harness import ratio_of_rounds_values, rotated, summarize
from .stacks import Backends, MemplaneStack

ROUNDS = 5
BIG_BATCH, SMALL_BATCH = 5000, 50
MILLION = 1_000_000


def _add(runtime: Runtime, tenant_id: uuid.UUID, n: int) -> None:
    actor = Actor(tenant_id, "api", "bench")
    with runtime.sessions() as session:
        for start in range(0, n, 5000):
            begin_write(session)
            audit.record_many(session, actor, "write",
                              [(uuid.uuid4(), f"user: v1 1024 B row {start + i}")
                               for i in range(min(5000, n - start))])
            session.commit()


def _seal_timed(runtime: Runtime, tenant_id: uuid.UUID, rows: int,
                with_tree: bool) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``seal`` of ``rows`` rows added just before.

    Each call starts from the same state, untimed: SQLite's write-ahead log checkpointed and
    emptied (else the call whose commit crosses the log's 1,000 pages copies them all into
    the database, and which call that is depends on what was added before it), and Python's
    garbage collected (else a full collection of the heap lands in whichever call crosses its
    threshold). Both were single calls of several milliseconds in a shape of one call per
    round: a ratio of 2.7 in one run, 0.4 in another."""
    _add(runtime, tenant_id, rows)
    with runtime.sessions() as session:
        scrub_freed(session)  # SQLite: the log checkpointed and truncated; PostgreSQL: nothing
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        audit.seal(session, tenant_id, batch=BIG_BATCH, with_tree=with_tree)
        return time.process_time() - c0, time.perf_counter() - w0


def sealer_case(backends: Backends, database: str, *, quick: bool) -> dict[str, dict[str, Any]]:
    """Each round seals the same rows for both tenants, one ``seal`` call at a time, the two
    taking turns call by call (who goes first rotates), so both meet the same state of the
    machine, the database and the process's heap."""
    stack = MemplaneStack(backends, database, "local")
    runtime = stack.runtime
    out: dict[str, dict[str, Any]] = {}
    try:
        with runtime.sessions() as session:
            tenants = {mode: create_tenant(session, f"bench-{mode}")[0].id
                       for mode in ("tree", "chain")}
        for shape, per_call, rows in (("batch5000", BIG_BATCH, 4 * BIG_BATCH),
                                      ("calls_of_50", SMALL_BATCH, 2000)):
            rows = max(rows // 4, 2 * per_call) if quick else rows  # ≥ 2 calls a round
            cpu: dict[str, list[float]] = {"tree": [], "chain": []}
            wall: dict[str, list[float]] = {"tree": [], "chain": []}
            for r in range(ROUNDS + 1):  # round 0 warms up
                spent = {mode: [0.0, 0.0] for mode in cpu}
                for call in range(rows // per_call):
                    for mode in rotated(["tree", "chain"], r + call):
                        c, w = _seal_timed(runtime, tenants[mode], per_call, mode == "tree")
                        spent[mode][0] += c
                        spent[mode][1] += w
                if r:
                    for mode, (c, w) in spent.items():
                        cpu[mode].append(c / rows * 1e6)
                        wall[mode].append(w / rows * 1e6)
            out[f"audit-tree/sealer_cpu_per_row/{database}/{shape}"] = {
                "memplane": round(summarize(cpu["tree"]).median, 2),
                "floor": round(summarize(cpu["chain"]).median, 2), "peer": None,
                "unit": "µs of sealer CPU per row (memplane: chain and tree; floor: the "
                        "chain alone)",
                "ratio": ratio_of_rounds_values(cpu["tree"], cpu["chain"]).json(),
                "wall_us_per_row": {mode: round(summarize(v).median, 2)
                                    for mode, v in wall.items()},
                "wall_ratio": ratio_of_rounds_values(wall["tree"], wall["chain"]).json(),
                "rows_per_round": rows, "rows_per_seal": per_call, "rounds": ROUNDS}
    finally:
        stack.close()
    return out


_COLUMNS = ("tenant_id", "accessor_type", "accessor_id", "agent_id", "operation", "success",
            "detail", "request_id", "accessed_at")


def _copy_rows(stack: MemplaneStack, tenant_id: uuid.UUID, n: int) -> None:
    """``n`` unsealed rows in one COPY (the sealer then seals them as it would any)."""
    raw = stack.runtime.engine.raw_connection()
    try:
        cursor = raw.cursor()
        at = utcnow()
        with cursor.copy(f"COPY access_logs ({', '.join(_COLUMNS)}) FROM STDIN") as copy:
            for i in range(n):
                copy.write_row((tenant_id, "api", "key:bench", None, "read", True,
                                f"user: v1 1024 B row {i}", f"req-{i:08d}", at))
        raw.commit()
        cursor.execute("ANALYZE access_logs")
        raw.commit()
    finally:
        raw.close()


def _latencies(fn: Any, samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return sorted(out)


def _p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))]


def proof_case(backends: Backends, *, quick: bool,
               rows: int = MILLION) -> dict[str, dict[str, Any]]:
    stack = MemplaneStack(backends, "postgres", "local")
    runtime, actor = stack.runtime, stack.actor
    tenant_id = actor.tenant_id
    out: dict[str, dict[str, Any]] = {}
    try:
        with runtime.sessions() as session:
            audit.seal(session, tenant_id)
            have = tree.size_of(session, tenant_id)
        _copy_rows(stack, tenant_id, rows - have)
        c0, w0 = time.process_time(), time.perf_counter()
        with runtime.sessions() as session:
            sealed = audit.seal(session, tenant_id)
            size, root = tree.head(session, tenant_id)
        seal_cpu, seal_wall = time.process_time() - c0, time.perf_counter() - w0
        rng = random.Random(7)
        samples = 300 if quick else 2000

        def pure() -> None:
            seq = rng.randrange(1, size + 1)
            with runtime.sessions() as session:
                reader = tree.Reader(session, tenant_id)
                proof = merkle.inclusion_proof(seq - 1, size, reader)
            if reader.queries != 1 or not proof:
                raise AssertionError("a proof read more than one query")

        def served() -> None:
            with runtime.sessions() as session:
                transparency.inclusion_as(session, runtime.plane, actor,
                                          rng.randrange(1, size + 1), size)

        stack.serve()
        http = stack.http_client()

        def over_http() -> None:
            answer = http.get("/v1/audit/proof/inclusion",
                              params={"seq": rng.randrange(1, size + 1), "tree_size": size})
            if answer.status_code != 200:
                raise AssertionError(f"the proof route answered {answer.status_code}")

        check = http.get("/v1/audit/proof/inclusion", params={"seq": 1, "tree_size": size})
        leaf_ok = check.status_code == 200
        figures = {}
        for name, fn in (("tiles_and_fold", pure), ("inclusion_as", served),
                         ("http", over_http)):
            _latencies(fn, 50)  # warm-up
            found = _latencies(fn, samples)
            figures[name] = {"p50_ms": round(statistics.median(found), 3),
                             "p99_ms": round(_p(found, 0.99), 3)}
        http.close()
        out["audit-tree/inclusion_proof_1M/postgres/http"] = {
            "memplane": figures["http"]["p50_ms"], "floor": None, "peer": None,
            "unit": "ms p50 (GET /v1/audit/proof/inclusion, one client)",
            "tree_size": size, "samples": samples, "proof_route_ok": leaf_ok,
            "by_layer": figures, "root": root.hex(),
            "sealing": {"rows": sealed, "cpu_s": round(seal_cpu, 1),
                        "wall_s": round(seal_wall, 1),
                        "rows_per_s": round(sealed / seal_wall) if seal_wall else None}}
    finally:
        stack.close()
    return out


def run(*, quick: bool) -> dict[str, dict[str, Any]]:
    backends = Backends()
    try:
        results: dict[str, dict[str, Any]] = {}
        for database in ("postgres", "sqlite"):
            results |= sealer_case(backends, database, quick=quick)
        results |= proof_case(backends, quick=quick, rows=100_000 if quick else MILLION)
        return results
    finally:
        backends.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_tree")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["sealer", "proof"], default=None)
    args = parser.parse_args()
    backends = Backends()
    try:
        results: dict[str, dict[str, Any]] = {}
        if args.only in (None, "sealer"):
            for database in ("postgres", "sqlite"):
                results |= sealer_case(backends, database, quick=args.quick)
                print(json.dumps(results, indent=1), flush=True)
        if args.only in (None, "proof"):
            results |= proof_case(backends, quick=args.quick,
                                  rows=100_000 if args.quick else MILLION)
    finally:
        backends.close()
    for name, entry in results.items():
        if "ratio" in entry:
            print(f"{name}: tree {entry['memplane']} µs/row, chain {entry['floor']} µs/row, "
                  f"ratio {entry['ratio']['median']} (min {entry['ratio']['min']}, max "
                  f"{entry['ratio']['max']}); wall ratio {entry['wall_ratio']['median']}")
        else:
            print(f"{name}: {json.dumps(entry)}")


if __name__ == "__main__":
    main()
