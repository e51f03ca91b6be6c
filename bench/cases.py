"""The cases: write and verified read of 1 KiB values, memplane against the floor.

Per stack and concurrency, every system — the in-process floor (audited, and bare), the HTTP
floor, LangGraph's PostgresStore (PostgreSQL stacks), memplane in-process and over HTTP — is
warmed up, then measured in ROUNDS rounds whose order rotates (each goes first in turn); a
case reports the median of its rounds, their spread, and ratios taken round by round.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from . import compliance, scale, sustained
from .harness import Measurement, measure, ratio_of_rounds, rotated, summarize
from .stacks import Backends, Floor, MemplaneStack, Peer

VALUE = {"text": "x" * 1000}
PAYLOAD = json.dumps(VALUE, separators=(",", ":")).encode()
BODY = json.dumps({"value": VALUE}, separators=(",", ":")).encode()
MATRIX = [("sqlite", "local"), ("postgres", "local"), ("postgres", "s3")]
CONCURRENCY = (1, 16)
ROUNDS = 5
WARMUP = 32  # operations per system and concurrency before the first round


def ops_per_round(quick: bool, concurrency: int) -> int:
    """--quick: 100 at c1, 16 per thread at c16; else 1,000 and 2,000."""
    if quick:
        return 100 if concurrency == 1 else 16 * concurrency
    return 1000 if concurrency == 1 else 2000


Op = Callable[[int], object]
# A system: for a round tag, the per-thread write and read operations.
System = Callable[[str], tuple[list[Op], list[Op]]]


def run_all(*, quick: bool, only: list[str], stacks: bool = True,
            others: bool = True) -> dict[str, dict[str, Any]]:
    """The write/read cases of each stack (``stacks``), and the erase, export and scale cases
    (``others``), as ``only`` selects them."""
    console = Console(stderr=True, width=180)
    results: dict[str, dict[str, Any]] = {}
    table = Table(title=f"memplane vs floors (ops/s, median of {ROUNDS} rounds; "
                        "ratios: median of per-round ratios)")
    for column in ("case", "memplane", "floor", "mp/floor", "HTTP floor", "mp/HTTP floor",
                   "bare floor", "peer", "spread", "p50 ms", "p99 ms"):
        table.add_column(column, justify="right" if column != "case" else "left")
    backends = Backends()
    try:
        for database, bucket in MATRIX if stacks else []:
            stack_name = f"{database}+{bucket}"
            if only and not any(stack_name.startswith(p) or p in stack_name for p in only):
                continue
            stack = MemplaneStack(backends, database, bucket)
            # The server and the floors get a database (and bucket) each of their own: on a
            # shared one, the server's background threads (audit sealer, search indexer)
            # would chain and embed what the in-process systems wrote too — work charged to
            # the server's process, and on SQLite its write lock taken while a floor runs.
            server_stack = MemplaneStack(backends, database, bucket)
            floor_stack = MemplaneStack(backends, database, bucket)
            floor, bare = Floor.of(floor_stack), Floor.of(floor_stack, audit=False)
            peer = Peer(backends, max(CONCURRENCY)) if database == "postgres" else None
            try:
                server_stack.serve()
                floor_stack.serve_floor()
                for concurrency in CONCURRENCY:
                    rows = _stack_case(stack, server_stack, floor_stack, stack_name, floor,
                                       bare, peer, concurrency,
                                       ops_per_round(quick, concurrency))
                    for name, entry in rows.items():
                        results[name] = entry
                        _case_row(table, name, entry)
                    console.print(f"done {stack_name} c{concurrency}")
                if stack_name in sustained.STACKS:
                    results |= sustained.run(server_stack, stack_name, quick=quick)
            finally:
                floor.close()
                bare.close()
                if peer is not None:
                    peer.close()
                stack.close()
                server_stack.close()
                floor_stack.close()
        if others and (not only or "erase" in only):
            erased = compliance.erase_case(2_000 if quick else 10_000)
            results |= erased
            _rows(table, erased)
        for backend in compliance.EXPORT_BACKENDS if others else ():  # --only export, -s3 …
            if not only or "export" in only or f"export-{backend}" in only:
                # 1 GiB in full; --quick: 200 MiB locally, 64 MiB on the emulators.
                exported = compliance.export_case(
                    (200 if backend == "local" else 64) if quick else 1024, backend=backend)
                results |= exported
                _rows(table, exported)
        if others and (not only or any("scale".startswith(p) for p in only)):
            scaled = scale.run(backends, quick=quick)
            results |= scaled
            for name, r in scaled.items():
                if r.get("unit") == "text":
                    continue
                table.add_row(name + " (ms)", f"{r['memplane']:.2f}", f"{r['floor']:.2f}",
                              f"{r['ratio']['median']:.2f}", "-", "-", "-", "-",
                              f"{r['spread']:.0%}", "", "")
            console.print(scale.explain_text(scaled))
    finally:
        backends.close()
    if table.row_count:
        console.print(table)
    return results


def _stack_case(stack: MemplaneStack, server_stack: MemplaneStack,
                floor_stack: MemplaneStack, stack_name: str, floor: Floor, bare: Floor,
                peer: Peer | None, concurrency: int, n: int) -> dict[str, dict[str, Any]]:
    clients = [server_stack.http_client() for _ in range(concurrency)]
    floor_clients = [floor_stack.floor_client() for _ in range(concurrency)]
    try:
        systems: dict[str, System] = {
            "floor": _inproc(floor.set, floor.get, concurrency, payload=PAYLOAD),
            "bare": _inproc(bare.set, bare.get, concurrency, payload=PAYLOAD),
            "inproc": _inproc(stack.set, stack.get, concurrency, payload=VALUE),
            "http": _http(clients, "/v1/memories/user/bench/"),
            "http_floor": _http(floor_clients, "/floor/"),
        }
        if peer is not None:
            systems["peer"] = _peer(peer, concurrency)
        warmup = max(WARMUP, 4 * concurrency)
        for system in systems.values():  # warm-up: connections, caches, code paths
            writes, reads = system(f"w{concurrency}")
            measure(lambda i: None, warmup, concurrency, per_thread=writes)
            measure(lambda i: None, warmup, concurrency, per_thread=reads)
        for each in {id(s): s for s in (stack, server_stack, floor_stack)}.values():
            each.analyze()
        server_stack.settle()
        rounds: dict[str, dict[str, list[Measurement]]] = {"write": {}, "read": {}}

        def one_round(r: int) -> None:
            ops = {name: system(f"r{concurrency}-{r}") for name, system in systems.items()}
            for kind, index in (("write", 0), ("read", 1)):
                for name in rotated(list(ops), r):  # each system goes first in turn
                    server_stack.settle()  # the server's indexing and sealing of its round
                    rounds[kind].setdefault(name, []).append(
                        measure(lambda i: None, n, concurrency, per_thread=ops[name][index]))

        for r in range(ROUNDS):
            one_round(r)
    finally:
        for client in clients + floor_clients:
            client.close()
    out: dict[str, dict[str, Any]] = {}
    for kind, by_system in rounds.items():
        for mode in ("inproc", "http"):
            out[f"{kind}/{stack_name}/{mode}/c{concurrency}"] = _entry(
                by_system, mode, stack_name, n)
    return out


def _entry(by: dict[str, list[Measurement]], mode: str, stack_name: str,
           n: int) -> dict[str, Any]:
    mine = by[mode]

    def med(name: str) -> float | None:
        return round(summarize([m.per_second for m in by[name]]).median, 1) \
            if name in by else None

    entry: dict[str, Any] = {
        "memplane": med(mode), "floor": med("floor"),
        "peer": med("peer") if mode == "inproc" else None, "unit": "ops/s",
        "http_floor": med("http_floor") if mode == "http" else None,
        "bare_floor": med("bare"), "rounds": len(mine), "ops_per_round": n,
        "vs_floor": ratio_of_rounds(mine, by["floor"]).json(),
        "spread": {name: summarize([m.per_second for m in ms]).json()
                   for name, ms in by.items()},
        "p50_ms": round(summarize([m.p50_ms for m in mine]).median, 3),
        "p99_ms": round(summarize([m.p99_ms for m in mine]).median, 3),
    }
    if mode == "http":
        entry["vs_http_floor"] = ratio_of_rounds(mine, by["http_floor"]).json()
    if entry["peer"] is not None:
        entry["peer_stack"] = (f"LangGraph PostgresStore on this run's PostgreSQL, measured "
                               f"in the {stack_name} rounds (content in PostgreSQL, no bucket)")
    return entry


def _case_row(table: Table, name: str, e: dict[str, Any]) -> None:
    def num(v: float | None) -> str:
        return f"{v:,.0f}" if v else "-"

    def ratio(key: str) -> str:
        r = e.get(key)
        return f"{r['median']:.2f}" if r else "-"

    mode = "inproc" if "/inproc/" in name else "http"
    table.add_row(name, num(e["memplane"]), num(e["floor"]), ratio("vs_floor"),
                  num(e["http_floor"]), ratio("vs_http_floor"), num(e["bare_floor"]),
                  num(e["peer"]), f"{e['spread'][mode]['spread']:.0%}",
                  f"{e['p50_ms']:.2f}", f"{e['p99_ms']:.2f}")


def _inproc(write: Callable[[str, Any], object], read: Callable[[str], object],
            concurrency: int, *, payload: Any) -> System:
    def ops(tag: str) -> tuple[list[Op], list[Op]]:
        w: Op = lambda i: write(f"{tag}-{i}", payload)  # noqa: E731
        r: Op = lambda i: read(f"{tag}-{i}")  # noqa: E731
        return [w] * concurrency, [r] * concurrency
    return ops


def _http(clients: list[httpx.Client], prefix: str) -> System:
    def ops(tag: str) -> tuple[list[Op], list[Op]]:
        def write(c: httpx.Client) -> Op:
            return lambda i: c.put(f"{prefix}{tag}-{i}", content=BODY, headers={
                "content-type": "application/json"}).raise_for_status()

        def read(c: httpx.Client) -> Op:
            return lambda i: c.get(f"{prefix}{tag}-{i}").raise_for_status()
        return [write(c) for c in clients], [read(c) for c in clients]
    return ops


def _peer(peer: Peer, concurrency: int) -> System:
    def ops(tag: str) -> tuple[list[Op], list[Op]]:
        def write(t: int) -> Op:
            return lambda i: peer.set(f"{tag}-{i}", VALUE, t)

        def read(t: int) -> Op:
            return lambda i: peer.get(f"{tag}-{i}", t)
        return [write(t) for t in range(concurrency)], [read(t) for t in range(concurrency)]
    return ops


def _rows(table: Table, cases: dict[str, dict[str, Any]]) -> None:
    for name, r in cases.items():
        floor = r["floor"]
        ratio = f"{r['memplane'] / floor:.2f}" if floor else "-"
        if r.get("bar"):  # a bound rather than a floor: the figure over it
            ratio = f"{r['memplane'] / r['bar']:.2f} of bar {r['bar']}"
        table.add_row(f"{name} ({r['unit'].split(' ')[0]})", f"{r['memplane']:,}",
                      f"{floor:,}" if floor is not None else "-", ratio, "-", "-", "-", "-",
                      "", "", "")

