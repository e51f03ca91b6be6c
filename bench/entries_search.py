"""The cost of entry search through the keyed blind index (control_plane/entries/terms.py).

In-process (services, no HTTP), one thread, local bucket, SQLite or PostgreSQL (started
here, durable). Prints:
- write: ms per entry created with its terms, and with the index switched off (the same
  protocol without the HMACs and the term rows): the difference is the index's overhead;
- search over ``--n`` entries (default 10,000): latency of ``search=`` for a rare, a common
  and a two-word query, metadata only and with the summaries read from the bucket.
Not a test.

    .venv/bin/python -m bench.entries_search [--database sqlite|postgres] [--n 10000]
"""

from __future__ import annotations

import argparse
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from control_plane.entries import service as entries
from control_plane.entries import terms as blind
from control_plane.entries.schemas import EntryIn
from control_plane.identity import Actor
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant

# A vocabulary with a Zipf-like spread: word i appears about 1/(i+1) as often as word 0.
VOCABULARY = [f"w{i}" for i in range(5000)]
WEIGHTS = [1 / (i + 1) for i in range(len(VOCABULARY))]


def _summary(rng: random.Random, words: int = 80) -> str:
    return " ".join(rng.choices(VOCABULARY, WEIGHTS, k=words)) + "."


@contextmanager
def _runtime(database: str) -> Iterator[Runtime]:
    pg = None
    with tempfile.TemporaryDirectory() as tmp:
        values: dict[str, Any] = {"data_dir": Path(tmp), "sqlite_synchronous": "NORMAL",
                                  "run_background": False}
        if database == "postgres":
            from tests.support.postgres import PostgresCluster

            pg = PostgresCluster(durable=True).start()
            values |= {"database_url": pg.create_database(),
                       "server_key": secrets.token_hex(24), "allow_local_storage": True,
                       "default_bucket_url": f"file://{Path(tmp) / 'bucket'}"}
        settings = Settings(**values)
        runtime = Runtime(settings)
        runtime.migrate()
        try:
            yield runtime
        finally:
            runtime.close()
            if pg is not None:
                pg.stop()


def _create_many(runtime: Runtime, actor: Actor, specs: list[EntryIn]) -> float:
    """Seconds per entry."""
    started = time.perf_counter()
    with runtime.sessions() as session:
        for spec in specs:
            entries.create_entry(session, runtime.plane, actor, spec)
    return (time.perf_counter() - started) / len(specs)


def _latency(fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """(median, 95th percentile) in ms."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def run(database: str, n: int, write_sample: int, rounds: int) -> None:
    rng = random.Random(11)
    with _runtime(database) as runtime:
        with runtime.sessions() as session:
            tenant, _ = create_tenant(session, "bench")
        actor = Actor(tenant.id, "api", "bench")
        specs = [EntryIn(scope="entity", scope_ref=f"ent{i % 100}", title=f"entry {i}",
                         summary=_summary(rng)) for i in range(n)]
        _create_many(runtime, actor, specs[:50])  # warm up: keys created, caches filled
        # Alternate batches with and without the index (the machine is shared and noisy);
        # the entries written without it are written again with it below.
        with_index = without_index = 0.0
        batch = max(1, write_sample // 5)
        real_terms = blind.terms
        for start in range(50, 50 + write_sample, batch):
            with_index += _create_many(runtime, actor, specs[start:start + batch]) / 5
            blind.terms = lambda key, texts: []  # type: ignore[assignment]
            try:
                without_index += _create_many(runtime, actor, specs[start:start + batch]) / 5
            finally:
                blind.terms = real_terms
        _create_many(runtime, actor, specs[50 + write_sample:])
        print(f"[{database}] write: {with_index * 1000:.2f} ms/entry with the index, "
              f"{without_index * 1000:.2f} ms/entry without "
              f"(+{(with_index - without_index) * 1000:.2f} ms, "
              f"{len(blind.words(specs[0].title + ' ' + specs[0].summary))} terms/entry)")

        def search(query: str, include: bool) -> Callable[[], Any]:
            def call() -> Any:
                with runtime.sessions() as session:
                    items, _ = entries.list_entries(session, runtime.plane, actor,
                                                    search=query, include_summary=include,
                                                    limit=100)
                return items
            return call

        queries = {"rare word (w4000)": "w4000", "common word (w1)": "w1",
                   "two words (w1 w30)": "w1 w30"}
        for label, query in queries.items():
            hits = len(search(query, False)())
            meta = _latency(search(query, False), rounds)
            full = _latency(search(query, True), max(3, rounds // 4))
            print(f"[{database}] search over {n} entries, {label}: {hits} hits on the "
                  f"first page; metadata p50 {meta[0]:.1f} ms p95 {meta[1]:.1f} ms; with "
                  f"summaries p50 {full[0]:.1f} ms p95 {full[1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--write-sample", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    run(args.database, args.n, args.write_sample, args.rounds)


if __name__ == "__main__":
    main()
