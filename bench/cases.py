"""The cases: write and verified read of 1 KiB values, memplane against the floor."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from . import compliance, scale
from .harness import Measurement, measure
from .stacks import Backends, Floor, MemplaneStack, Peer

VALUE = {"text": "x" * 1000}
PAYLOAD = json.dumps(VALUE, separators=(",", ":")).encode()
MATRIX = [("sqlite", "local"), ("postgres", "local"), ("postgres", "s3")]


def _ops(quick: bool, concurrency: int, bucket: str) -> int:
    base = 150 if quick else 1000
    if bucket == "s3":
        base //= 2
    return base * (2 if concurrency > 1 else 1)


def run_all(*, quick: bool, only: list[str]) -> dict[str, dict[str, Any]]:
    console = Console(stderr=True)
    results: dict[str, dict[str, Any]] = {}
    table = Table(title="memplane vs floor (ops/s, higher is better)")
    for column in ("case", "memplane", "floor", "ratio", "bare floor", "peer", "p50 ms",
                   "p99 ms"):
        table.add_column(column, justify="right" if column != "case" else "left")
    backends = Backends()
    try:
        for database, bucket in MATRIX:
            stack_name = f"{database}+{bucket}"
            if only and not any(stack_name.startswith(p) or p in stack_name for p in only):
                continue
            stack = MemplaneStack(backends, database, bucket)
            floor, bare = Floor(stack), Floor(stack, audit=False)
            try:
                stack.serve()
                for concurrency in (1, 16):
                    n = _ops(quick, concurrency, bucket)
                    f_write = measure(
                        lambda i, c=concurrency, fl=floor: fl.set(f"f{c}-{i}", PAYLOAD),
                        n, concurrency)
                    f_read = measure(lambda i, c=concurrency, fl=floor: fl.get(f"f{c}-{i}"),
                                     n, concurrency)
                    b_write = measure(
                        lambda i, c=concurrency, fl=bare: fl.set(f"b{c}-{i}", PAYLOAD),
                        n, concurrency)
                    b_read = measure(lambda i, c=concurrency, fl=bare: fl.get(f"b{c}-{i}"),
                                     n, concurrency)
                    peer = _peer(backends, database, concurrency, n)
                    for mode in ("inproc", "http"):
                        tag = f"{mode}-{concurrency}"
                        write, read = _memplane(stack, mode, tag, n, concurrency)
                        for kind, m, f, bf in (("write", write, f_write, b_write),
                                               ("read", read, f_read, b_read)):
                            name = f"{kind}/{stack_name}/{mode}/c{concurrency}"
                            p = peer.get(kind) if mode == "inproc" else None
                            results[name] = {"memplane": round(m.per_second, 1),
                                             "floor": round(f.per_second, 1),
                                             "peer": round(p, 1) if p else None,
                                             "unit": "ops/s"}
                            table.add_row(name, f"{m.per_second:,.0f}", f"{f.per_second:,.0f}",
                                          f"{m.per_second / f.per_second:.2f}",
                                          f"{bf.per_second:,.0f}",
                                          f"{p:,.0f}" if p else "-",
                                          f"{m.p50_ms:.2f}", f"{m.p99_ms:.2f}")
                        console.print(f"done {stack_name} {tag}")
            finally:
                stack.close()
        if not only or "erase" in only:
            erased = compliance.erase_case(2_000 if quick else 10_000)
            results |= erased
            _rows(table, erased)
        if not only or "export" in only:
            exported = compliance.export_case(200 if quick else 1_000)
            results |= exported
            _rows(table, exported)
        if not only or any("scale".startswith(p) for p in only):
            scaled = scale.run(backends, quick=quick)
            results |= scaled
            for name, r in scaled.items():
                table.add_row(name + " (ms)", f"{r['memplane']:.2f}", f"{r['floor']:.2f}",
                              f"{r['memplane'] / r['floor']:.2f}", "-", "-", "", "")
    finally:
        backends.close()
    console.print(table)
    return results


def _rows(table: Table, cases: dict[str, dict[str, Any]]) -> None:
    for name, r in cases.items():
        floor = r["floor"]
        ratio = f"{r['memplane'] / floor:.2f}" if floor else "-"
        table.add_row(f"{name} ({r['unit'].split(' ')[0]})", f"{r['memplane']:,}",
                      f"{floor:,}" if floor is not None else "-", ratio, "-", "-", "", "")


_PEER_CACHE: dict[int, dict[str, float]] = {}


def _peer(backends: Backends, database: str, concurrency: int, n: int) -> dict[str, float]:
    """LangGraph PostgresStore put/get on the same PostgreSQL, measured once per concurrency."""
    if database != "postgres":
        return {}
    if concurrency not in _PEER_CACHE:
        peer = Peer(backends, concurrency)
        try:
            write = measure(lambda i: peer.set(f"p{concurrency}-{i}", VALUE), n, concurrency)
            read = measure(lambda i: peer.get(f"p{concurrency}-{i}"), n, concurrency)
        finally:
            peer.close()
        _PEER_CACHE[concurrency] = {"write": write.per_second, "read": read.per_second}
    return _PEER_CACHE[concurrency]


def _memplane(stack: MemplaneStack, mode: str, tag: str, n: int,
              concurrency: int) -> tuple[Measurement, Measurement]:
    if mode == "inproc":
        write = measure(lambda i: stack.set(f"{tag}-{i}", VALUE), n, concurrency)
        read = measure(lambda i: stack.get(f"{tag}-{i}"), n, concurrency)
        return write, read

    def http_op(kind: str):  # type: ignore[no-untyped-def]
        def setup():  # type: ignore[no-untyped-def]
            client = stack.http_client()
            if kind == "write":
                return lambda i: client.put(f"/v1/memories/user/bench/{tag}-{i}",
                                            json={"value": VALUE}).raise_for_status()
            return lambda i: client.get(f"/v1/memories/user/bench/{tag}-{i}").raise_for_status()
        return setup

    write = measure(lambda i: None, n, concurrency, setup=http_op("write"))
    read = measure(lambda i: None, n, concurrency, setup=http_op("read"))
    return write, read
