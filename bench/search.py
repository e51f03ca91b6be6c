"""Semantic search: warm and cold search latency against a plain numpy top-k floor, object
reads of a cold search, and acknowledged write throughput with the background indexer on
and off (control_plane/search).

In-process (services, no HTTP), local bucket, SQLite (NORMAL) or PostgreSQL (started here),
the built-in hashing embedder (512 dimensions). For each size (default 10,000 and 100,000
memories in one scope) the scope is filled through the write service's batch protocol
(sealed put per memory, one commit per 500 memories, as ``POST /v1/memories:batch``),
indexed by ``indexer.drain`` in batches of 1,024 and compacted into one snapshot. Then, over
``--rounds`` rounds of ``--queries`` queries each:
- floor: a plain numpy top-k over the same vectors in memory (one matrix product, an
  argpartition, a sort of the k best), with numpy's BLAS limited as the server limits it
  (MEMPLANE_BLAS_THREADS) and, last in each round, at numpy's default thread count; beside
  it, for reference, the same top-k reading only the query's nonzero columns of a
  column-major copy (what the search's product does for a sparse query);
- warm: ``search.service.search`` with the index in the cache — query embedding, ranking
  (vector + BM25, fused), the one SQL query of the live filter and the audit row's commit
  included; without values, and with values (verified values cached by hash);
- cold: the cache emptied before each search; the adapter's RequestStats count its reads.
Write throughput: rounds alternate writes of ``--write-ops`` memories with the indexer
thread running and without it; the figure is acknowledged writes per second, and the ratio
on/off per round (the bar is ≥ 0.9). Prints figures and ratios; asserts nothing.

    .venv/bin/python -m bench.search [--database sqlite|postgres] [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import random
import secrets
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import summarize
from bench.stacks import analyze
from control_plane.addresses import MemoryAddress, Scope
from control_plane.background import shared_clock
from control_plane.embedders.hashing import HashingEmbedder
from control_plane.identity import Actor
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.search import blas, foreground, index_rows, indexer, segment_writing
from control_plane.search import service as search
from control_plane.search.schemas import SearchIn
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant

#: numpy's BLAS threads before any runtime limits them (MEMPLANE_BLAS_THREADS).
DEFAULT_BLAS = blas.current_threads()
VOCABULARY = [f"w{i}" for i in range(3000)]
WEIGHTS = [1 / (i + 1) ** 0.8 for i in range(len(VOCABULARY))]
K = 10
WRITE_WARM_UP = 2000  # memories written and indexed before the write rounds


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCABULARY, WEIGHTS, k=14))


@contextmanager
def _runtime(database: str) -> Iterator[Runtime]:
    pg = None
    with tempfile.TemporaryDirectory() as tmp:
        values: dict[str, Any] = {"data_dir": Path(tmp), "sqlite_synchronous": "NORMAL",
                                  "run_background": False, "embed_on_write": False}
        if database == "postgres":
            from tests.support.postgres import PostgresCluster

            pg = PostgresCluster(durable=True).start()
            values |= {"database_url": pg.create_database(),
                       "server_key": secrets.token_hex(24), "allow_local_storage": True,
                       "default_bucket_url": f"file://{Path(tmp) / 'bucket'}"}
        runtime = Runtime(Settings(**values))
        runtime.migrate()
        try:
            yield runtime
        finally:
            runtime.close()
            if pg is not None:
                pg.stop()


def _fill(runtime: Runtime, actor: Actor, ref: str, texts: list[str], chunk: int = 500) -> float:
    """The scope filled through the write service's batch protocol
    (``write_fast.prepare_fast``: lookup and sealed put per memory, then
    ``hotpath_commit.commit_writes``: one transaction per ``chunk`` memories, each with its
    audit row) — as ``POST /v1/memories:batch`` does."""
    from control_plane.memories import hotpath_commit, write_fast
    from control_plane.memories.api import serialise

    began = time.perf_counter()
    with runtime.sessions() as session:
        for first in range(0, len(texts), chunk):
            prepared = []
            for i in range(first, min(first + chunk, len(texts))):
                address, meta = MemoryAddress.parse(Scope.agent, ref, f"m{i}"), MemoryMeta()
                target = runtime.plane.for_memory(session, actor.tenant_id, address.scope,
                                                  meta.agent_id, meta.user_id)
                request = write_fast.prepare_fast(session, runtime.plane, actor, address,
                                                  target, serialise(texts[i]), meta)
                if request is None:  # the scope's key did not exist yet: the general path
                    _write(runtime, actor, ref, [texts[i]], i)
                    continue
                prepared.append(request)
            hotpath_commit.commit_writes(session, prepared)
    return time.perf_counter() - began


def _write(runtime: Runtime, actor: Actor, ref: str, texts: list[str], start: int = 0) -> float:
    """Seconds for these writes (each acknowledged, i.e. committed)."""
    began = time.perf_counter()
    with runtime.sessions() as session:
        for i, text in enumerate(texts, start=start):
            memories.set_value(session, runtime.plane, actor,
                               MemoryAddress.parse(Scope.agent, ref, f"m{i}"), text,
                               MemoryMeta())
    return time.perf_counter() - began


def _ms(fn: Callable[[], Any]) -> float:
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000


def _gets(runtime: Runtime, tenant_id: Any) -> int:
    with runtime.sessions() as session:
        adapter = runtime.plane.active(session, tenant_id).adapter
    return int(adapter.stats.counts.get("get", 0))


def _p50(values: list[float]) -> float:
    return statistics.median(values)


def run_size(database: str, n: int, rounds: int, queries: int) -> None:
    rng = random.Random(n)
    with _runtime(database) as runtime:
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "bench")
        actor = Actor(tenant.id, "api", "bench")
        texts = [_text(rng) for _ in range(n)]
        fill = _fill(runtime, actor, "bench", texts)
        began = time.perf_counter()
        with runtime.sessions() as session:
            report = indexer.drain(session, runtime.plane, runtime, runtime.search_cache,
                                   batch=1024)
            before = [(s.kind, s.rows) for s in index_rows.segments(
                session, tenant.id, "agent", "bench")]
            segment_writing.compact_scope(session, runtime.plane, runtime.search_cache,
                                          tenant.id, "agent", "bench", HashingEmbedder.name)
        index_s = time.perf_counter() - began
        analyze(runtime.engine)
        print(f"[{database} n={n}] fill {n / fill:.0f} writes/s ({fill:.1f} s); indexing "
              f"{n / index_s:.0f} memories/s ({index_s:.1f} s, {report.deltas} deltas, "
              f"{report.compacted} compactions; segments before the last compaction: "
              f"{len(before)})")

        def request(query: str, values: bool) -> SearchIn:
            return SearchIn(query=query, scope=Scope.agent, scope_ref="bench", limit=K,
                            include_values=values)

        def do_search(query: str, values: bool = False) -> search.SearchResults:
            with runtime.sessions() as session:
                return search.search(session, runtime, actor, request(query, values))

        # Cold: the cache emptied before each search; reads counted by the adapter.
        cold_ms: list[float] = []
        cold_reads: list[int] = []
        cold_value_reads: list[int] = []
        for r in range(max(3, rounds)):
            query = _text(rng)[:40]
            runtime.search_cache.clear()
            gets = _gets(runtime, tenant.id)
            cold_ms.append(_ms(lambda q=query: do_search(q)))  # type: ignore[misc]
            cold_reads.append(_gets(runtime, tenant.id) - gets)
            runtime.search_cache.clear()
            gets = _gets(runtime, tenant.id)
            do_search(query, True)
            cold_value_reads.append(_gets(runtime, tenant.id) - gets)
            del r
        # The floor: the same vectors, in memory, one matrix.
        with runtime.sessions() as session:
            rows = index_rows.segments(session, tenant.id, "agent", "bench")
            from control_plane.search import store

            matrix = np.vstack([store.load_segment(session, runtime.plane,
                                                   runtime.search_cache, row).vectors
                                for row in rows])
        embedder = HashingEmbedder()
        server_blas = runtime.settings.blas_threads
        columns = np.asfortranarray(matrix).T  # row j: dimension j of every memory
        floor_p50: list[float] = []
        sparse_p50: list[float] = []
        floor_default_p50: list[float] = []  # numpy's BLAS at its own default thread count
        warm_p50: list[float] = []
        warm_cpu: list[float] = []
        warm_values_p50: list[float] = []
        found_gets: list[int] = []
        round_vectors: list[np.ndarray] = []
        for _ in range(rounds):
            batch = [_text(rng)[:40] for _ in range(queries)]
            vectors = embedder.embed(batch)

            def floor(v: np.ndarray) -> np.ndarray:
                scores = matrix @ v
                top = np.argpartition(-scores, K)[:K]
                return top[np.argsort(-scores[top])]

            def sparse_floor(v: np.ndarray) -> np.ndarray:
                nonzero = np.flatnonzero(v)
                scores = v[nonzero] @ columns[nonzero]
                top = np.argpartition(-scores, K)[:K]
                return top[np.argsort(-scores[top])]

            floor_p50.append(_p50([_ms(lambda v=v: floor(v)) for v in vectors]))  # type: ignore[misc]
            sparse_p50.append(_p50([_ms(lambda v=v: sparse_floor(v))  # type: ignore[misc]
                                    for v in vectors]))
            for q in batch[:2]:
                do_search(q, True)  # fill the value cache for these queries
            gets = _gets(runtime, tenant.id)
            cpu = time.thread_time()
            warm_p50.append(_p50([_ms(lambda q=q: do_search(q)) for q in batch]))  # type: ignore[misc]
            warm_cpu.append((time.thread_time() - cpu) * 1000 / len(batch))
            warm_values_p50.append(_p50([_ms(lambda q=q: do_search(q, True))  # type: ignore[misc]
                                         for q in batch[:2] * (queries // 2)]))
            found_gets.append(_gets(runtime, tenant.id) - gets)
            round_vectors.append(vectors)
        if DEFAULT_BLAS is not None and DEFAULT_BLAS != server_blas:
            # After every round: OpenBLAS's helper threads keep spinning for ~0.1 s after a
            # product (0.05 s of CPU measured), so here they overlap no search.
            blas.limit_threads(DEFAULT_BLAS)
            floor_default_p50 = [_p50([_ms(lambda v=v: floor(v))  # type: ignore[misc]
                                       for v in vectors]) for vectors in round_vectors]
            blas.limit_threads(server_blas)
        floor_s = summarize(floor_p50)
        warm = summarize(warm_p50)
        warm_v = summarize(warm_values_p50)
        ratio = summarize([w / f for w, f in zip(warm_p50, floor_p50, strict=True)])
        print(f"[{database} n={n}] floor (numpy top-{K}, vectors in memory, BLAS threads "
              f"{server_blas or DEFAULT_BLAS} as the server runs it): p50 "
              f"{floor_s.median:.2f} ms (rounds {floor_s.low:.2f}-{floor_s.high:.2f})")
        sparse = summarize(sparse_p50)
        print(f"[{database} n={n}] for reference, the same top-k over the query's nonzero "
              f"columns only: p50 {sparse.median:.2f} ms (rounds {sparse.low:.2f}-"
              f"{sparse.high:.2f})")
        if floor_default_p50:
            default = summarize(floor_default_p50)
            ratio_default = summarize([w / f for w, f in zip(warm_p50, floor_default_p50,
                                                             strict=True)])
            print(f"[{database} n={n}] floor with numpy's default {DEFAULT_BLAS} BLAS "
                  f"threads: p50 {default.median:.2f} ms (rounds {default.low:.2f}-"
                  f"{default.high:.2f}); warm search's ratio to it {ratio_default.median:.2f}x")
        print(f"[{database} n={n}] warm search, no values: p50 {warm.median:.2f} ms "
              f"(rounds {warm.low:.2f}-{warm.high:.2f}; searching thread's CPU "
              f"{summarize(warm_cpu).median:.2f} ms per search); ratio to floor "
              f"{ratio.median:.2f}x (spread {ratio.spread:.2f}); with cached verified values: "
              f"p50 {warm_v.median:.2f} ms; bucket reads during warm searches: "
              f"{sum(found_gets)}")
        print(f"[{database} n={n}] cold search: p50 {_p50(cold_ms):.0f} ms; object reads "
              f"{sorted(set(cold_reads))} without values, {sorted(set(cold_value_reads))} "
              f"with {K} values (1 snapshot + {K} value reads)")


def _index_in_process(settings: Settings, ready: Any, stop: Any, cpu: Any,
                      clock: Any = None) -> None:
    """An indexer in a process of its own, with its own runtime on the same database and
    bucket: flat out as ``memplane worker`` runs it, or with ``clock`` yielding to the
    writing process, whose database use it reads from the clock the two share (as
    ``memplane serve``'s background process does, control_plane.background). ``cpu``
    receives the process's CPU seconds from ready to stop."""
    runtime = Runtime(settings)
    try:
        yielding: dict[str, Any] = {} if clock is None else {
            "yield_ms": settings.index_yield_ms, "max_lag": settings.index_max_lag_seconds,
            "activity": foreground.ServerActivity(clock)}
        worker = indexer.Indexer(runtime.sessions, runtime.plane, runtime,
                                 runtime.search_cache, **yielding)
        began = time.process_time()
        ready.set()
        worker.run_forever(stop)
        cpu.value = time.process_time() - began
    finally:
        runtime.close()


def _index_in_thread(worker: indexer.Indexer, stop: threading.Event, cpu: list[float]) -> None:
    began = time.thread_time()
    worker.run_forever(stop)
    cpu.append(time.thread_time() - began)


def _indexed(runtime: Runtime, tenant_id: Any) -> tuple[int, int]:
    """(pointers of the tenant, those whose vector is ready)."""
    from sqlalchemy import func, select

    from control_plane.db.models import MemoryPointer as P

    with runtime.sessions() as session:
        total, ready = session.execute(
            select(func.count(), func.count().filter(index_rows.vector_ready()))
            .where(P.tenant_id == tenant_id)).one()
    return int(total), int(ready)


def run_writes(database: str, rounds: int, ops: int,
               shapes: tuple[str, ...] = ("worker", "embedded")) -> None:
    """Acknowledged writes per second with the indexer off, in a worker process (the
    production shape: ``memplane worker`` beside API replicas that run no jobs), in a
    background process that yields to the writer as ``memplane serve``'s does, and as a
    thread of the writing process (MEMPLANE_BACKGROUND_PROCESS=false); the last two yield to
    requests within MEMPLANE_INDEX_MAX_LAG_SECONDS. The modes take turns within each round,
    in a rotating order; after an indexed round the indexer runs on until every memory
    written is indexed (the catch-up, not counted in the writes' time, is printed); before
    each round what an off round left is drained (untimed)."""
    import multiprocessing

    rng = random.Random(7)
    spawn = multiprocessing.get_context("spawn")
    with _runtime(database) as runtime:
        settings = runtime.settings
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "bench-writes")
        actor = Actor(tenant.id, "api", "bench")
        # A running deployment's tables: some memories, indexed, and their statistics taken
        # (``analyze``: plans made for an empty table would scan the tenant's rows per write).
        _fill(runtime, actor, "warmup", [_text(rng) for _ in range(WRITE_WARM_UP)])
        _write(runtime, actor, "warmup", [_text(rng) for _ in range(100)], WRITE_WARM_UP)
        with runtime.sessions() as session:
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        analyze(runtime.engine)
        modes = ("off", *shapes)
        rates: dict[str, list[float]] = {mode: [] for mode in modes}
        catch_up: dict[str, list[float]] = {mode: [] for mode in shapes}
        cpu_ms: dict[str, list[float]] = {mode: [] for mode in shapes}  # per memory
        writer_ms: dict[str, list[float]] = {mode: [] for mode in modes}  # CPU per write
        start = 0
        for r in range(rounds):
            for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
                with runtime.sessions() as session:  # what an off round left
                    indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
                texts = [_text(rng) for _ in range(ops)]
                stop: Any = None
                worker: Any = None
                cpu: Any = None
                published: Any = None
                if mode in ("worker", "process"):
                    stop, ready, cpu = spawn.Event(), spawn.Event(), spawn.Value("d", 0.0)
                    clock = None
                    if mode == "process":  # the writer publishes its database use
                        clock = shared_clock()
                        published = foreground.ForegroundActivity(runtime.engine, shared=clock)
                    worker = spawn.Process(target=_index_in_process,
                                           args=(settings, ready, stop, cpu, clock))
                    worker.start()
                    ready.wait(120)
                elif mode == "embedded":
                    stop = threading.Event()
                    thread_indexer = indexer.Indexer(
                        runtime.sessions, runtime.plane, runtime, runtime.search_cache,
                        yield_ms=settings.index_yield_ms,
                        max_lag=settings.index_max_lag_seconds)
                    cpu = []
                    worker = threading.Thread(target=_index_in_thread,
                                              args=(thread_indexer, stop, cpu),
                                              name="memplane-search-indexer")
                    worker.start()
                writer_cpu = time.thread_time()
                seconds = _write(runtime, actor, f"w{r}{mode}", texts, start)
                writer_ms[mode].append((time.thread_time() - writer_cpu) * 1000 / ops)
                start += ops
                rates[mode].append(ops / seconds)
                if worker is not None:
                    began = time.perf_counter()
                    while True:
                        total, ready_rows = _indexed(runtime, tenant.id)
                        if total == ready_rows or time.perf_counter() - began > 300:
                            break
                        time.sleep(0.05)
                    catch_up[mode].append(time.perf_counter() - began)
                    stop.set()
                    worker.join()
                    if published is not None:
                        published.close()
                    cpu_ms[mode].append(
                        (cpu[0] if mode == "embedded" else cpu.value) * 1000 / ops)
                    if total != ready_rows:
                        print(f"[{database}] {mode}: {total - ready_rows} memories left "
                              f"unindexed after 300 s")
        off = rates["off"]
        total, ready_rows = _indexed(runtime, tenant.id)
        print(f"[{database}] acknowledged writes, {ops} per round, {rounds} rounds: "
              f"{summarize(off).median:.0f}/s with no indexer (writer CPU "
              f"{summarize(writer_ms['off']).median:.2f} ms per write)")
        labels = {"worker": "indexer in a worker process (production shape)",
                  "process": f"indexer in a background process yielding to the writer "
                             f"(memplane serve, max lag {settings.index_max_lag_seconds:g} s)",
                  "embedded": f"indexer thread in the writing process "
                              f"(MEMPLANE_BACKGROUND_PROCESS=false, yield "
                              f"{settings.index_yield_ms:g} ms, max lag "
                              f"{settings.index_max_lag_seconds:g} s)"}
        for mode in shapes:
            ratio = summarize([a / b for a, b in zip(rates[mode], off, strict=True)])
            print(f"[{database}]   {labels[mode]}: {summarize(rates[mode]).median:.0f}/s; "
                  f"ratio {ratio.median:.2f}x (rounds {ratio.low:.2f}-{ratio.high:.2f}, "
                  f"bar >= 0.9); all indexed {summarize(catch_up[mode]).median:.2f} s after "
                  f"the last write (rounds {min(catch_up[mode]):.2f}-"
                  f"{max(catch_up[mode]):.2f}); indexer CPU "
                  f"{summarize(cpu_ms[mode]).median:.2f} ms per memory, writer CPU "
                  f"{summarize(writer_ms[mode]).median:.2f} ms per write")
        with runtime.sessions() as session:
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        total, ready_rows = _indexed(runtime, tenant.id)
        print(f"[{database}] check: {ready_rows} of {total} memories have their vector")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--write-ops", type=int, default=300)
    parser.add_argument("--skip-writes", action="store_true")
    parser.add_argument("--write-shapes", default=None,
                        help="where the indexer runs in the write bench: 'worker' (its own "
                             "process, flat out), 'process' (its own process, yielding to "
                             "the writer: memplane serve's background process) and/or "
                             "'embedded' (a thread of the writing process); default: all")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",") if s):
        run_size(args.database, size, args.rounds, args.queries)
    if not args.skip_writes:
        shapes = args.write_shapes or "worker,process,embedded"
        run_writes(args.database, args.rounds, args.write_ops,
                   tuple(s for s in shapes.split(",") if s))


if __name__ == "__main__":
    main()
