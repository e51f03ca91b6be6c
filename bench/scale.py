"""Scale: verified get and list-by-scope latency with 10,000 and with 1,000,000 pointers in
PostgreSQL. The 10k figure is the floor the 1M figure is held to.

Two databases on the same PostgreSQL server, one per size, so the two alternate round by
round (ROUNDS rounds, each size and case first in turn) instead of the 1M figure being taken
after the 10k one. In each:

- ``REAL`` memories written through memplane (real sealed objects), under random keys; the
  get reads them in a random order, so the lookup walks the index at a random place rather
  than re-reading a few hot pages;
- the rest bulk-loaded with COPY, in a random order, into scopes of exactly SCOPE_ROWS rows
  (at 10k: 98 or 90 scopes; at 1M: ~10,000): list-by-scope lists a random full scope, so
  both sizes list the same number of rows.

At the large size the bench also reports EXPLAIN (ANALYZE, BUFFERS) of the get-by-key and
the list-by-scope statements, as memplane sends them.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import event, select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db import direct
from control_plane.db.base import new_id
from control_plane.db.models import MemoryPointer
from control_plane.memories import hotpath, write_request
from control_plane.memories import service as memories

from .harness import ratio_of_rounds_values, rotated, summarize
from .stacks import Backends, MemplaneStack

COLUMNS = ("id", "tenant_id", "scope_type", "scope_ref", "key", "memory_type", "tags",
           "importance", "source", "storage_config_id", "storage_path", "content_sha256",
           "content_size", "sync_status", "version", "has_embeddings", "created_at",
           "updated_at")
SMALL, LARGE = 10_000, 1_000_000
SCOPE_ROWS = 100  # every listed scope holds exactly this many pointers, at both sizes
ROUNDS = 5


def real_count(quick: bool) -> int:
    return 200 if quick else 1000  # SMALL - real_count is a multiple of SCOPE_ROWS


class Sized:
    """One database holding ``total`` pointers of the bench tenant."""

    def __init__(self, backends: Backends, total: int, real: int, seed: int) -> None:
        self.stack = MemplaneStack(backends, "postgres", "local")
        self.rng = random.Random(seed)
        self.keys = [f"real-{uuid.uuid4().hex}" for _ in range(real)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: self.stack.set(k, {"k": k, "text": "x" * 1000}),
                          self.keys))
        self.bulk = total - real
        assert self.bulk % SCOPE_ROWS == 0, "scopes must all be full"
        self.scopes = self.bulk // SCOPE_ROWS
        _bulk_load(self.stack, self.bulk, self.rng)

    def get(self) -> None:
        self.stack.get(self.rng.choice(self.keys))

    def list_scope(self) -> None:
        with self.stack.runtime.sessions() as session:
            rows, _ = memories.list_pointers(
                session, self.stack.actor, scope="user",
                scope_ref=f"s{self.rng.randrange(self.scopes)}", user_id=None,
                memory_type=None, sync_status=None, cursor=None, limit=SCOPE_ROWS)
        if len(rows) != SCOPE_ROWS:
            raise AssertionError(f"a scope listed {len(rows)} rows, not {SCOPE_ROWS}")

    def close(self) -> None:
        self.stack.close()


def _bulk_load(stack: MemplaneStack, count: int, rng: random.Random) -> None:
    with stack.runtime.sessions() as session:
        seed = session.scalars(select(MemoryPointer)
                               .where(MemoryPointer.tenant_id == stack.actor.tenant_id)
                               .limit(1)).one()
        config_id, tenant_id = seed.storage_config_id, seed.tenant_id
    order = list(range(count))
    rng.shuffle(order)  # a scope's rows land all over the table, as they would in use
    raw = stack.runtime.engine.raw_connection()
    try:
        cursor = raw.cursor()
        columns = ", ".join(COLUMNS)
        with cursor.copy(f"COPY memory_pointers ({columns}) FROM STDIN") as copy:
            for i in order:
                copy.write_row((
                    new_id(), tenant_id, "user", f"s{i // SCOPE_ROWS}", f"bulk{i}", "fact",
                    "[]", 3, "api", config_id, f"bulk/{i}.json", "0" * 64, 10, "synced", 1,
                    False, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
                ))
        raw.commit()
        cursor.execute("ANALYZE memory_pointers")
        raw.commit()
    finally:
        raw.close()


def _latency(fn: Any, n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def explain(sized: Sized) -> dict[str, list[str]]:
    """EXPLAIN (ANALYZE, BUFFERS) of the get's lookup and of the list's page query."""
    stack = sized.stack
    engine = stack.runtime.engine
    address = MemoryAddress.parse(Scope.user, "bench", sized.keys[0])
    compiled = hotpath.LOOKUP_READ.compile(dialect=engine.dialect)
    get_sql = compiled.string
    get_params = compiled.construct_params(
        write_request.address_params(stack.actor.tenant_id, address))

    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "memory_pointers" in statement:
            seen.append((statement, parameters))

    # On PostgreSQL a listing is one statement run straight on the driver (``db.direct``),
    # which SQLAlchemy's events do not see: it is caught on its way there.
    run = direct.run

    def run_and_capture(engine: Any, statement: Any, params: Any, **options: Any) -> Any:
        if "memory_pointers" in str(statement):
            compiled = direct._compile(engine, statement)
            seen.append((compiled.string, compiled.construct_params(params)))
        return run(engine, statement, params, **options)

    event.listen(engine, "before_cursor_execute", capture)
    direct.run = run_and_capture  # type: ignore[assignment]
    try:
        sized.list_scope()
    finally:
        direct.run = run  # type: ignore[assignment]
        event.remove(engine, "before_cursor_execute", capture)
    if not seen:
        raise AssertionError("the list ran no statement on memory_pointers")
    list_sql, list_params = seen[0]
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        plans = {}
        for name, sql, params in (("get_by_key", get_sql, get_params),
                                  ("list_by_scope", list_sql, list_params)):
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            plans[name] = [row[0] for row in cursor.fetchall()]
        raw.rollback()
    finally:
        raw.close()
    return plans


def run(backends: Backends, *, quick: bool) -> dict[str, dict[str, Any]]:
    real = real_count(quick)
    small = Sized(backends, SMALL, real, seed=1)
    large = None
    try:
        large = Sized(backends, LARGE, real, seed=2)
        n = 100 if quick else 500
        runs = {("get", "small"): small.get, ("get", "large"): large.get,
                ("list", "small"): small.list_scope, ("list", "large"): large.list_scope}
        for fn in runs.values():  # warm-up
            _latency(fn, 20)
        rounds: dict[tuple[str, str], list[float]] = {k: [] for k in runs}
        for r in range(ROUNDS):
            for k in rotated(list(runs), r):
                rounds[k].append(_latency(runs[k], n))
        plans = explain(large)
    finally:
        small.close()
        if large is not None:
            large.close()
    out: dict[str, dict[str, Any]] = {}
    for case, label in (("get", "get_latency_1M_vs_10k"),
                        ("list", "list_scope_latency_1M_vs_10k")):
        big, little = rounds[(case, "large")], rounds[(case, "small")]
        out[f"scale/{label}"] = {
            "memplane": round(summarize(big).median, 3),
            "floor": round(summarize(little).median, 3), "peer": None,
            "unit": "ms (median of rounds; floor = same at 10k pointers)",
            "ratio": ratio_of_rounds_values(big, little).json(),
            "spread": round(summarize(big).spread, 3), "rounds": ROUNDS,
            "samples_per_round": n,
            "what": (f"verified get of a random one of {real} real memories"
                     if case == "get" else
                     f"list of a random scope of exactly {SCOPE_ROWS} pointers"),
        }
    out["scale/explain_1M"] = {"memplane": None, "floor": None, "peer": None, "unit": "text",
                               **plans}
    return out


def explain_text(results: dict[str, dict[str, Any]]) -> str:
    plans = results.get("scale/explain_1M")
    if not plans:
        return ""
    lines = []
    for name in ("get_by_key", "list_by_scope"):
        lines.append(f"EXPLAIN (ANALYZE, BUFFERS) {name} at 1M pointers:")
        lines.extend("  " + line for line in plans.get(name, []))
    return "\n".join(lines)
