"""The batch case of ``python -m bench``: 1 KiB writes and verified reads over HTTP through
``POST /v1/memories:batch`` (batches of :data:`BATCH`), against single-request memplane over
HTTP on the same server, against the HTTP floor's batch of writes (``POST /floor:batch``: the
objects stored together, every row in one transaction) and against LangGraph's PostgresStore
``put``/``get`` in-process on the same PostgreSQL (one store, with its own connection, per
thread), at 1 and 16 threads.
Items per second; the rounds alternate and each side keeps its median round."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from .harness import Measurement, measure
from .stacks import Backends, MemplaneStack

Setup = Callable[[], Callable[[int], object]]

VALUE = {"text": "x" * 1000}
BATCH = 100
ROUNDS = 3
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


def _median(runs: list[Measurement], items_per_op: int) -> float:
    return statistics.median(m.ops * items_per_op / m.seconds for m in runs)


def run(*, quick: bool) -> dict[str, dict[str, Any]]:
    console = Console(stderr=True)
    table = Table(title=f"batch API (items/s, batches of {BATCH}, 1 KiB values, "
                        f"median of {ROUNDS} rounds)")
    for column in ("case", "memplane batch", "HTTP floor batch", "memplane single",
                   "LangGraph peer", "batch/peer", "batch/floor", "floor/peer", "batch/single"):
        table.add_column(column, justify="right" if column != "case" else "left")
    results: dict[str, dict[str, Any]] = {}
    backends = Backends()
    stack = MemplaneStack(backends, "postgres", "local")
    peers = _PeerStores(_dsn(backends), 16)
    try:
        stack.serve()
        stack.serve_floor()
        with stack.http_client() as warm:  # subject key, caches, connections, a filled table
            warm.put("/v1/memories/user/bench/warm", json={"value": VALUE}).raise_for_status()
            for b in range(WARM_BATCHES):
                warm.post("/v1/memories:batch", json={"operations": [
                    {"op": "set", "scope": "user", "scope_ref": "bench", "key": f"warm-{b}-{j}",
                     "value": VALUE} for j in range(BATCH)]}).raise_for_status()
        stack.analyze()
        for concurrency in (1, 16):
            n = _items(quick, concurrency)
            runs: dict[str, list[Measurement]] = {k: [] for k in (
                "batch-write", "batch-read", "single-write", "single-read", "peer-write",
                "peer-read", "floor-write")}
            singles = max(concurrency * 10, n // 10)  # single requests are ~20x slower
            cases: list[tuple[str, int, Callable[[str], Setup]]] = [
                ("batch-write", n // BATCH, lambda tag: _batch_op(stack, "set", tag)),
                ("floor-write", n // BATCH, lambda tag: _floor_op(stack, tag)),
                ("batch-read", n // BATCH, lambda tag: _batch_op(stack, "get", tag)),
                ("single-write", singles, lambda tag: _single_op(stack, "put", tag)),
                ("single-read", singles, lambda tag: _single_op(stack, "get", tag)),
                ("peer-write", n, lambda tag: _peer_op(peers, "put", tag)),
                ("peer-read", n, lambda tag: _peer_op(peers, "get", tag)),
            ]
            for r in range(ROUNDS):
                tag = f"c{concurrency}-r{r}"
                for name, ops, setup in cases:
                    stack.settle()  # the server's indexing and sealing of the case before
                    runs[name].append(measure(lambda i: None, ops, concurrency,
                                              setup=setup(tag)))
            for kind in ("write", "read"):
                batch = _median(runs[f"batch-{kind}"], BATCH)
                single = _median(runs[f"single-{kind}"], 1)
                peer = _median(runs[f"peer-{kind}"], 1)
                floor = _median(runs["floor-write"], BATCH) if kind == "write" else None
                name = f"batch-{kind}/postgres+local/http/c{concurrency}"
                results[name] = {"memplane": round(batch, 1), "floor": round(single, 1),
                                 "http_floor": round(floor, 1) if floor else None,
                                 "peer": round(peer, 1), "unit": "items/s"}
                table.add_row(name, f"{batch:,.0f}", f"{floor:,.0f}" if floor else "-",
                              f"{single:,.0f}", f"{peer:,.0f}", f"{batch / peer:.2f}",
                              f"{batch / floor:.2f}" if floor else "-",
                              f"{floor / peer:.2f}" if floor else "-", f"{batch / single:.2f}")
            console.print(f"done batch c{concurrency}")
    finally:
        peers.close()
        stack.close()
        backends.close()
    console.print(table)
    return results


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
