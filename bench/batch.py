"""The batch case of ``python -m bench``: 1 KiB writes and verified reads over HTTP through
``POST /v1/memories:batch`` (batches of :data:`BATCH`), against single-request memplane over
HTTP on the same server, against the HTTP floor's batch of writes (``POST /floor:batch``: the
objects stored together, every row in one transaction) and against LangGraph's PostgresStore
``put``/``get`` in-process on the same PostgreSQL (one store, with its own connection, per
thread), at 1 and 16 threads.
Items per second; the rounds alternate and each side keeps its median round."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from .harness import Measurement, Summary, measure, ratio_of_rounds, rotated, summarize
from .stacks import Backends, MemplaneStack

Setup = Callable[[], Callable[[int], object]]

VALUE = {"text": "x" * 1000}
BATCH = 100
ROUNDS = 5
WARM_BATCHES = 20  # 2,000 memories before the rounds, then the tables are analyzed


def _items(quick: bool, concurrency: int) -> int:
    return (1_600 if quick else 8_000) * (2 if concurrency > 1 else 1)


class _PeerStores:
    """One LangGraph PostgresStore per thread, each on a connection of its own; the same
    stores serve every round (``rewind`` before each)."""

    def __init__(self, dsn: str, count: int) -> None:
        from langgraph.store.postgres import PostgresStore

        self._managers = [PostgresStore.from_conn_string(dsn) for _ in range(count)]
        self._stores = [m.__enter__() for m in self._managers]
        self._stores[0].setup()
        self._next = 0
        self._lock = threading.Lock()

    def rewind(self) -> None:
        self._next = 0

    def store(self) -> Any:
        with self._lock:
            store = self._stores[self._next]
            self._next += 1
        return store

    def close(self) -> None:
        for manager in self._managers:
            manager.__exit__(None, None, None)


def _dsn(backends: Backends) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(backends.database("postgres") or "")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def analyze_dsn(dsn: str) -> None:
    """ANALYZE a database the bench reaches by DSN (the peer's), as ``stacks.analyze``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")


# Each measurement: (name, items per operation). Ratios between two of them are taken round
# by round and scaled by their items per operation: items per second on both sides.
ITEMS = {"batch-write": BATCH, "floor-write": BATCH, "batch-read": BATCH, "single-write": 1,
         "single-read": 1, "peer-write": 1, "peer-read": 1}
# The figures of a case: (key in the results, numerator, denominator) per kind.
RATIOS = {"write": (("vs_peer", "batch-write", "peer-write"),
                    ("vs_http_floor", "batch-write", "floor-write"),
                    ("floor_vs_peer", "floor-write", "peer-write"),
                    ("vs_single", "batch-write", "single-write")),
          "read": (("vs_peer", "batch-read", "peer-read"),
                   ("vs_single", "batch-read", "single-read"))}


def items_per_second(runs: list[Measurement], name: str) -> float:
    """The median round's items per second."""
    return summarize([m.per_second * ITEMS[name] for m in runs]).median


def ratios(runs: dict[str, list[Measurement]], kind: str) -> dict[str, Summary]:
    """Each of ``kind``'s ratios (``RATIOS``) as the median of per-round ratios of items per
    second: the two sides of a ratio ran in the same round and share its noise."""
    return {key: ratio_of_rounds(runs[top], runs[bottom], scale=ITEMS[top] / ITEMS[bottom])
            for key, top, bottom in RATIOS[kind]}


T = TypeVar("T")


def in_round(writes: list[T], reads: list[T], round_no: int) -> list[T]:
    """Round ``round_no``'s order: the writes first (the reads read what they wrote), then
    the reads, each group rotated so that each goes first in turn."""
    return rotated(writes, round_no) + rotated(reads, round_no)


def run(*, quick: bool) -> dict[str, dict[str, Any]]:
    console = Console(stderr=True, width=180)
    table = Table(title=f"batch API (items/s, batches of {BATCH}, 1 KiB values, median of "
                        f"{ROUNDS} rotated rounds; ratios: median of per-round ratios)")
    for column in ("case", "memplane batch", "HTTP floor batch", "memplane single",
                   "LangGraph peer", "batch/peer", "batch/floor", "floor/peer", "batch/single"):
        table.add_column(column, justify="right" if column != "case" else "left")
    results: dict[str, dict[str, Any]] = {}
    backends = Backends()
    # memplane's server, the HTTP floor and the peer each on a database of their own: the
    # server's sealer and indexer work on its own writes only, never during another's round.
    stack = MemplaneStack(backends, "postgres", "local")
    floor_stack = MemplaneStack(backends, "postgres", "local")
    peer_dsn = _dsn(backends)
    peers = _PeerStores(peer_dsn, 16)
    try:
        stack.serve()
        floor_stack.serve_floor()
        _warm(stack, floor_stack, peers)
        stack.analyze()
        floor_stack.analyze()
        analyze_dsn(peer_dsn)
        for concurrency in (1, 16):
            n = _items(quick, concurrency)
            runs: dict[str, list[Measurement]] = {k: [] for k in ITEMS}
            singles = max(concurrency * 10, n // 10)  # single requests are ~20x slower
            cases: list[tuple[str, int, Callable[[str], Setup]]] = [
                ("batch-write", n // BATCH, lambda tag: _batch_op(stack, "set", tag)),
                ("floor-write", n // BATCH, lambda tag: _floor_op(floor_stack, tag)),
                ("single-write", singles, lambda tag: _single_op(stack, "put", tag)),
                ("peer-write", n, lambda tag: _peer_op(peers, "put", tag)),
            ]
            reads: list[tuple[str, int, Callable[[str], Setup]]] = [
                ("batch-read", n // BATCH, lambda tag: _batch_op(stack, "get", tag)),
                ("single-read", singles, lambda tag: _single_op(stack, "get", tag)),
                ("peer-read", n, lambda tag: _peer_op(peers, "get", tag)),
            ]
            for r in range(ROUNDS):
                tag = f"c{concurrency}-r{r}"
                for name, ops, setup in in_round(cases, reads, r):
                    stack.settle()  # the server's indexing and sealing of the case before
                    runs[name].append(measure(lambda i: None, ops, concurrency,
                                              setup=setup(tag)))
            for kind in ("write", "read"):
                results |= _report(table, runs, kind, concurrency)
            console.print(f"done batch c{concurrency}")
    finally:
        peers.close()
        stack.close()
        floor_stack.close()
        backends.close()
    console.print(table)
    return results


def _warm(stack: MemplaneStack, floor_stack: MemplaneStack, peers: _PeerStores) -> None:
    """Subject key, caches, connections and a filled table for each system (2,000 items
    each), so the tables are analyzed with rows in them."""
    from langgraph.store.base import PutOp

    with stack.http_client() as warm:
        warm.put("/v1/memories/user/bench/warm", json={"value": VALUE}).raise_for_status()
        for b in range(WARM_BATCHES):
            warm.post("/v1/memories:batch", json={"operations": [
                {"op": "set", "scope": "user", "scope_ref": "bench", "key": f"warm-{b}-{j}",
                 "value": VALUE} for j in range(BATCH)]}).raise_for_status()
    with floor_stack.floor_client() as warm:
        for b in range(WARM_BATCHES):
            warm.post("/floor:batch", json={"items": [
                {"key": f"warm-{b}-{j}", "value": VALUE} for j in range(BATCH)]}
            ).raise_for_status()
    peers.rewind()
    peers.store().batch([PutOp(("bench", "user"), f"warm-{j}", VALUE)
                         for j in range(WARM_BATCHES * BATCH)])
    stack.settle()


def _report(table: Table, runs: dict[str, list[Measurement]], kind: str,
            concurrency: int) -> dict[str, dict[str, Any]]:
    found = ratios(runs, kind)
    batch = items_per_second(runs[f"batch-{kind}"], f"batch-{kind}")
    single = items_per_second(runs[f"single-{kind}"], f"single-{kind}")
    peer = items_per_second(runs[f"peer-{kind}"], f"peer-{kind}")
    floor = items_per_second(runs["floor-write"], "floor-write") if kind == "write" else None
    name = f"batch-{kind}/postgres+local/http/c{concurrency}"

    def shown(key: str) -> str:
        return f"{found[key].median:.2f}" if key in found else "-"

    table.add_row(name, f"{batch:,.0f}", f"{floor:,.0f}" if floor else "-", f"{single:,.0f}",
                  f"{peer:,.0f}", shown("vs_peer"), shown("vs_http_floor"),
                  shown("floor_vs_peer"), shown("vs_single"))
    return {name: {"memplane": round(batch, 1), "floor": round(single, 1),
                   "http_floor": round(floor, 1) if floor else None, "peer": round(peer, 1),
                   "unit": "items/s", "rounds": len(runs[f"batch-{kind}"]),
                   **{key: summary.json() for key, summary in found.items()}}}


def _batch_op(stack: MemplaneStack, op: str,
              tag: str) -> Callable[[], Callable[[int], object]]:
    def setup() -> Callable[[int], object]:
        client = stack.http_client()

        def send(i: int) -> None:
            operations = [{"op": op, "scope": "user", "scope_ref": "bench",
                           "key": f"b-{tag}-{i * BATCH + j}"} for j in range(BATCH)]
            if op == "set":
                for operation in operations:
                    operation["value"] = VALUE
            response = client.post("/v1/memories:batch", json={"operations": operations})
            response.raise_for_status()
            statuses = {r["status"] for r in response.json()["results"]}
            assert statuses == {200}, statuses
        return send
    return setup


def _floor_op(stack: MemplaneStack, tag: str) -> Callable[[], Callable[[int], object]]:
    """The HTTP floor's batch (bench/http_floor.py): the objects stored together, every
    pointer row and audit row in one transaction."""
    def setup() -> Callable[[int], object]:
        client = stack.floor_client()

        def send(i: int) -> None:
            client.post("/floor:batch", json={"items": [
                {"key": f"f-{tag}-{i * BATCH + j}", "value": VALUE} for j in range(BATCH)]}
            ).raise_for_status()
        return send
    return setup


def _single_op(stack: MemplaneStack, method: str,
               tag: str) -> Callable[[], Callable[[int], object]]:
    def setup() -> Callable[[int], object]:
        client = stack.http_client()
        if method == "put":
            return lambda i: client.put(f"/v1/memories/user/bench/s-{tag}-{i}",
                                        json={"value": VALUE}).raise_for_status()
        return lambda i: client.get(f"/v1/memories/user/bench/s-{tag}-{i}").raise_for_status()
    return setup


def _peer_op(peers: _PeerStores, method: str,
             tag: str) -> Callable[[], Callable[[int], object]]:
    peers.rewind()

    def setup() -> Callable[[int], object]:
        store = peers.store()
        if method == "put":
            return lambda i: store.put(("bench", "user"), f"p-{tag}-{i}", VALUE)

        def get(i: int) -> object:
            item = store.get(("bench", "user"), f"p-{tag}-{i}")
            assert item is not None
            return item.value
        return get
    return setup
