"""The langgraph case of ``python -m bench``: memplane's LangGraph integration
(``MemplaneStore``, ``MemplaneCheckpointer``, through the SDK over HTTP to a ``memplane serve``
on PostgreSQL + a local bucket) against LangGraph's own ``PostgresStore`` and
``PostgresSaver`` in-process on the same PostgreSQL server, at 1 and 16 threads.

Operations: store ``put``, ``get``, ``search`` (a namespace prefix, 10 items, no query),
batched puts (``batch`` of :data:`BATCH` ``PutOp``), and a checkpoint step (``put`` of a
checkpoint then ``get_tuple`` of the thread's latest, threads of :data:`STEPS` steps). The
store is made with ``semantic=False``: like PostgresStore without an index, it embeds
nothing. Every
thread has its own client / store / saver (its own connection). The two sides alternate over
:data:`ROUNDS` rounds; the table gives the median round and the spread of the per-round
ratios. memplane's server, the HTTP floor and the peer each have a database of their own.
Bars (``bench/bars.py``, never asserted): a checkpoint step and batched puts each at least
0.8x the HTTP floor doing the same work (median of per-round ratios); the ratios to
PostgresSaver and PostgresStore are information."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, cast

import httpx
from rich.console import Console
from rich.table import Table

from .batch import _dsn, analyze_dsn
from .harness import (
    Measurement,
    alternate,
    measure,
    ratio_of_rounds,
    ratio_of_rounds_values,
    summarize,
)
from .stacks import ADMIN_KEY, Backends, MemplaneStack

VALUE = {"text": "x" * 1000}
MESSAGE = "The user prefers vegetarian food and short answers. " * 4
BATCH = 50
STEPS = 10
SEARCH_ITEMS = 20
ROUNDS = 3
BARRED = ("checkpoint-step", "store-batch-put")  # each >= 0.8x the HTTP floor (bench/bars.py)
CONCURRENCY = (1, 16)
Op = Callable[[int], object]


def _ops(quick: bool, case: str, concurrency: int) -> int:
    base = {"store-put": 80, "store-get": 80, "store-search": 40, "store-batch-put": 6,
            "checkpoint-step": 40}[case]
    return base * (1 if quick else 5) * (4 if concurrency > 1 else 1)


class Round:
    """The current round's tag, so each round writes keys and threads of its own."""

    tag = ""


def store_ops(store: Any, case: str, thread: int, rnd: type[Round]) -> Op:
    from langgraph.store.base import PutOp

    ns = ("users", f"bench-{thread}", "prefs")
    if case == "store-put":
        return lambda i: store.put(ns, f"p-{rnd.tag}-{i}", VALUE)
    if case == "store-batch-put":
        return lambda i: store.batch([PutOp(ns, f"b-{rnd.tag}-{i}-{j}", VALUE)
                                      for j in range(BATCH)])
    if case == "store-get":
        def get(i: int) -> object:
            item = store.get(ns, f"g-{i % SEARCH_ITEMS}")
            assert item is not None
            return item.value
        return get

    search_ns = ("users", f"search-{thread}")

    def search(i: int) -> object:
        found = store.search(search_ns, limit=10)
        assert len(found) == 10, len(found)
        return found
    return search


def seed_store(store: Any, thread: int) -> None:
    from langgraph.store.base import PutOp

    store.batch([PutOp(("users", f"bench-{thread}", "prefs"), f"g-{j}", VALUE)
                 for j in range(SEARCH_ITEMS)]
                + [PutOp(("users", f"search-{thread}", "facts"), f"s-{j}", VALUE)
                   for j in range(SEARCH_ITEMS)])


def step_op(saver: Any, thread: int, rnd: type[Round]) -> Op:
    from langgraph.checkpoint.base import empty_checkpoint

    def step(i: int) -> object:
        thread_id = f"t-{rnd.tag}-{thread}-{i // STEPS}"
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        version = i % STEPS + 1
        checkpoint["channel_values"] = {"messages": [MESSAGE] * version}
        checkpoint["channel_versions"] = {"messages": version}
        saver.put(config, checkpoint, {"source": "loop", "step": version}, {"messages": version})
        latest = saver.get_tuple(config)
        assert latest is not None and latest.checkpoint["id"] == checkpoint["id"]
        return latest
    return step


def floor_ops(client: httpx.Client, case: str, thread: int, rnd: type[Round]) -> Op | None:
    """The same operation as the HTTP floor does it (bench/http_floor.py): the least that
    memplane's invariants ask of it — each value a durable object in the bucket and a
    pointer row whose audit row is durable with it (I1, I6), each read checked against its
    SHA-256 and audited — behind the leanest FastAPI endpoint. No floor for a search."""
    value = json.dumps(VALUE).encode()

    def ok(response: httpx.Response) -> httpx.Response:
        response.raise_for_status()
        return response

    if case == "store-put":
        return lambda i: ok(client.put(f"/floor/p-{rnd.tag}-{thread}-{i}", content=value))
    if case == "store-batch-put":
        return lambda i: ok(client.post("/floor:batch", json={"items": [
            {"key": f"b-{rnd.tag}-{thread}-{i}-{j}", "value": VALUE} for j in range(BATCH)]}))
    if case == "store-get":
        return lambda i: ok(client.get(f"/floor/g-{thread}-{i % SEARCH_ITEMS}")).content
    if case == "checkpoint-step":
        def step(i: int) -> object:
            key = f"t-{rnd.tag}-{thread}-{i // STEPS}-{i % STEPS}"
            state = {"messages": [MESSAGE] * (i % STEPS + 1)}
            ok(client.put(f"/floor/{key}", content=json.dumps(state).encode()))
            return ok(client.get(f"/floor/{key}")).content
        return step
    return None


def seed_floor(client: httpx.Client, thread: int) -> None:
    client.post("/floor:batch", json={"items": [
        {"key": f"g-{thread}-{j}", "value": VALUE} for j in range(SEARCH_ITEMS)]}
    ).raise_for_status()


def run(*, quick: bool) -> dict[str, dict[str, Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    import memplane
    from memplane.integrations.langgraph import MemplaneCheckpointer, MemplaneStore

    console = Console(stderr=True, width=170)
    table = Table(title=f"LangGraph integration vs PostgresStore/PostgresSaver (median of "
                        f"{ROUNDS} rounds; batches of {BATCH} puts)")
    for column in ("case", "memplane /s", "HTTP floor /s", "peer /s", "ratio (spread)",
                   "floor/peer", "memplane p50 ms", "floor p50 ms", "peer p50 ms",
                   "p50 ratio (spread)", "floor p50/peer", "bar"):
        table.add_column(column, justify="right" if column != "case" else "left")
    results: dict[str, dict[str, Any]] = {}
    backends = Backends()
    stack = MemplaneStack(backends, "postgres", "local")
    # the floor on a database (and tenant) of its own: memplane's sealer and indexer never
    # work on its rows, nor during its rounds on rows of their own left over
    floor_stack = MemplaneStack(backends, "postgres", "local")
    threads = max(CONCURRENCY)
    with ExitStack() as resources:
        resources.callback(backends.close)
        resources.callback(stack.close)
        resources.callback(floor_stack.close)
        dsn = _dsn(backends)
        peer_stores = [resources.enter_context(PostgresStore.from_conn_string(dsn))
                       for _ in range(threads)]
        peer_savers = [resources.enter_context(PostgresSaver.from_conn_string(dsn))
                       for _ in range(threads)]
        peer_stores[0].setup()
        peer_savers[0].setup()
        stack.serve()
        floor_stack.serve_floor()
        with memplane.Client(stack.base_url, ADMIN_KEY) as admin:
            agent_key = admin.keys.create(role="agent", name="bench agent").api_key
        clients = [resources.enter_context(memplane.Client(stack.base_url, agent_key))
                   for _ in range(threads)]
        ours_stores = [MemplaneStore(c, semantic=False) for c in clients]
        ours_savers = [MemplaneCheckpointer(c, user_id=f"bench-{t}")
                       for t, c in enumerate(clients)]
        floor_clients = [resources.enter_context(floor_stack.floor_client())
                         for _ in range(threads)]
        for t in range(threads):
            seed_store(ours_stores[t], t)
            seed_store(peer_stores[t], t)
            seed_floor(floor_clients[t], t)
        stack.settle()
        stack.analyze()
        floor_stack.analyze()
        analyze_dsn(dsn)

        for case in ("store-put", "store-batch-put", "store-get", "store-search",
                     "checkpoint-step"):
            for concurrency in CONCURRENCY:
                n = _ops(quick, case, concurrency)
                if case == "checkpoint-step":
                    ours = [step_op(s, t, Round) for t, s in enumerate(ours_savers)]
                    peer = [step_op(s, t, Round) for t, s in enumerate(peer_savers)]
                else:
                    ours = [store_ops(s, case, t, Round) for t, s in enumerate(ours_stores)]
                    peer = [store_ops(s, case, t, Round) for t, s in enumerate(peer_stores)]

                def runner(side: str, ops: list[Op], c: int = concurrency,
                           n: int = n) -> Callable[[int], Measurement]:
                    def one(r: int) -> Measurement:
                        Round.tag = f"{side}-c{c}-r{r}"
                        return _measure(ops, n, c)
                    return one

                sides = {"memplane": runner("memplane", ours), "peer": runner("peer", peer)}
                floor = [floor_ops(c, case, t, Round) for t, c in enumerate(floor_clients)]
                if all(op is not None for op in floor):
                    sides["floor"] = runner("floor", cast(list[Op], floor))
                runs = alternate(sides, ROUNDS, between=stack.settle)
                results |= _report(table, case, concurrency, runs)
                console.print(f"done {case} c{concurrency}")
    console.print(table)
    return results


def _measure(ops: list[Op], n: int, concurrency: int) -> Measurement:
    return measure(lambda i: None, n, concurrency, per_thread=ops[:concurrency])


def _report(table: Table, case: str, concurrency: int,
            runs: dict[str, list[Measurement]]) -> dict[str, dict[str, Any]]:
    items = BATCH if case == "store-batch-put" else 1
    ours = statistics.median(m.per_second for m in runs["memplane"]) * items
    peer = statistics.median(m.per_second for m in runs["peer"]) * items
    ratio = ratio_of_rounds(runs["memplane"], runs["peer"])
    ours_p50 = summarize([m.p50_ms for m in runs["memplane"]]).median
    peer_p50 = summarize([m.p50_ms for m in runs["peer"]]).median
    latency = ratio_of_rounds_values([m.p50_ms for m in runs["memplane"]],
                                     [m.p50_ms for m in runs["peer"]])
    floors = runs.get("floor")
    floor = statistics.median(m.per_second for m in floors) * items if floors else None
    floor_p50 = summarize([m.p50_ms for m in floors]).median if floors else None
    floor_ratio = ratio_of_rounds(floors, runs["peer"]) if floors else None
    floor_latency = ratio_of_rounds_values([m.p50_ms for m in floors],
                                           [m.p50_ms for m in runs["peer"]]) if floors else None
    vs_floor = ratio_of_rounds(runs["memplane"], floors) if floors else None
    if vs_floor is not None and case in BARRED:
        bar = f"{vs_floor.median:.2f} ÷ floor: {'met' if vs_floor.median >= 0.8 else 'MISSED'}"
    else:
        bar = "-"
    unit = "items/s" if items > 1 else ("steps/s" if case == "checkpoint-step" else "ops/s")
    name = f"langgraph-{case}/postgres+local/http/c{concurrency}"

    def num(value: float | None, form: str) -> str:
        return "-" if value is None else format(value, form)

    table.add_row(name, f"{ours:,.0f}", num(floor, ",.0f"), f"{peer:,.0f}",
                  f"{ratio.median:.2f} ({ratio.spread:.0%})",
                  num(floor_ratio.median if floor_ratio else None, ".2f"), f"{ours_p50:.1f}",
                  num(floor_p50, ".1f"), f"{peer_p50:.1f}",
                  f"{latency.median:.2f} ({latency.spread:.0%})",
                  num(floor_latency.median if floor_latency else None, ".2f"), bar)
    return {name: {"memplane": round(ours, 1), "floor": round(floor, 1) if floor else None,
                   "peer": round(peer, 1), "unit": unit, "ratio": ratio.json(),
                   "floor_vs_peer": floor_ratio.json() if floor_ratio else None,
                   "p50_ms": round(ours_p50, 2), "peer_p50_ms": round(peer_p50, 2),
                   "floor_p50_ms": round(floor_p50, 2) if floor_p50 is not None else None,
                   "p50_ratio": latency.json(),
                   "vs_floor": vs_floor.json() if vs_floor else None,
                   "floor_p50_vs_peer": floor_latency.json() if floor_latency else None}}
