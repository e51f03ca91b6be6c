"""Where a served request's CPU goes, memplane's against the HTTP floor's: verified reads or
writes at 16 clients, or LangGraph operations.

``python -m bench.served_profile [--op read|write|step|batch-put] [--database sqlite|postgres]
[--rounds 4] [--requests 800] [--pyspy DIR]`` serves memplane (``memplane serve``, one worker)
and the HTTP floor (``bench/http_floor.py``), each on a database and bucket of its own as
``python -m bench`` does, writes ``--keys`` 1 KiB values to each, then alternates rounds of 16
clients (each system first in turn): verified reads of those keys, or writes of new keys, as the
bench's cases send them; ``step`` and ``batch-put`` are the langgraph case's checkpoint step and
batch of 50 store puts (``MemplaneCheckpointer`` and ``MemplaneStore`` over the SDK against the
floor doing the same; "per request" is then per operation). Per round and system it reads the
CPU per request from ``/proc`` — the server's event loop (its main thread), its request threads
(every other thread of its process) and its context switches, memplane's background process
(sealer and indexer), and on PostgreSQL the database's (every process of the cluster, which
serves only the system of the round) — and prints the medians in µs per request. With
``--pyspy DIR`` one more round of each runs under ``py-spy record --gil --threads -f raw``
(the thread holding the interpreter, 1,000 Hz: a one-process server is bound by it), and the
samples are summed by thread and by the parts named in :data:`PARTS`, in µs per request. With
``--statements`` (PostgreSQL) one more round of each runs with ``pg_stat_statements`` loaded
(planning tracked too), and each system's statements — its requests' and its background work's —
are listed by the database's time they took: calls, plans made, µs planning and executing, and
rows, per request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import Engine, text

from .cases import BODY
from .harness import measure
from .langgraph import Round, floor_ops, step_op, store_ops
from .stacks import ADMIN_KEY, Backends, MemplaneStack

CONCURRENCY = 16
RATE = 1000  # py-spy samples per second
_TICK = os.sysconf("SC_CLK_TCK")

# Parts of a request, found by the innermost frame whose function name (file:function)
# contains the text: the first match from the leaf wins. Order: most specific first.
PARTS: list[tuple[str, str]] = [
    ("bucket (local)", "storage_adapters/local"),
    ("AES-GCM", "envelope.py:"),
    ("AES-GCM", "cryptography/"),
    ("SHA-256", "sha256_hex"),
    ("statement on the driver", "direct.py:"),
    ("audit row (batcher)", "batcher.py:"),
    ("seal audit address", "sealed.py:"),
    ("response JSON", "to_json"),
    ("pointer to JSON", "pointer_json"),
    ("metrics", "prometheus_client"),
    ("request id", "token_bytes"),
    ("key check (gate)", "key_gate.py:"),
    ("key check (gate)", "authentication.py:"),
    ("body/path policy (middleware)", "request_context.py:"),
    ("scoped-key check", "access.py:"),
    ("SQLAlchemy session", "sqlalchemy/orm/"),
    ("SQLAlchemy core", "sqlalchemy/"),
    ("psycopg", "psycopg/"),
    ("sqlite3", "sqlite3"),
    ("body validation (pydantic)", "pydantic"),
    ("JSON parse", "json/"),
    ("memplane memories path", "memories/"),
    ("memplane other", "control_plane/"),
    ("FastAPI routing/params", "fastapi/"),
    ("Starlette", "starlette/"),
    ("uvicorn HTTP", "uvicorn/"),
    ("thread hand-off (anyio)", "anyio/"),
    ("asyncio/uvloop", "asyncio/"),
    ("threading", "threading.py"),
]


def _cpu(pid: int) -> dict[int, float]:
    """Seconds of CPU (user + system) of each thread of ``pid``."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _switches(pid: int) -> dict[int, int]:
    """Context switches (voluntary and not) of each thread of ``pid`` so far: each is a
    thread put to sleep and another woken (a hand-off to a thread, the interpreter lock
    passed, a wait on the disk or the database), paid for in the kernel's scheduler."""
    out: dict[int, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[int(tid)] = sum(int(line.split()[1]) for line in f
                                    if "ctxt_switches:" in line)
        except FileNotFoundError:
            continue
    return out


def since(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """What the threads alive at ``after`` did since ``before`` (a thread started since counts
    whole). A thread that ended in between is not in ``after``: the pool's idle threads exit
    between rounds, and a sum over the process before and after would subtract their counts
    from the round's (negative switches a request)."""
    return sum(value - before.get(tid, 0) for tid, value in after.items())


def _children(pid: int) -> list[int]:
    return [c.pid for c in psutil.Process(pid).children(recursive=True)]


def _database_cpu() -> float:
    """Seconds of CPU of every PostgreSQL process on the machine (the bench's cluster: its
    backends, WAL writer, checkpointer); 0 on SQLite, which runs inside the server."""
    total = 0.0
    for process in psutil.process_iter(["name"]):
        if process.info["name"] in ("postgres", "postmaster"):
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
    return total


class Served:
    """One server under test: its process, its clients, its keys; ``steppers``, one per
    client, run a LangGraph operation (``--op step`` or ``batch-put``) as the langgraph case
    sends it."""

    def __init__(self, name: str, pid: int, clients: list[httpx.Client], prefix: str,
                 steppers: dict[str, list[Any]] | None = None) -> None:
        self.name, self.pid, self.clients, self.prefix = name, pid, clients, prefix
        self.steppers = steppers or {}

    def fill(self, keys: int) -> None:
        ops = [lambda i, c=c: c.put(f"{self.prefix}k{i}", content=BODY, headers={
            "content-type": "application/json"}).raise_for_status() for c in self.clients]
        measure(lambda i: None, keys, CONCURRENCY, per_thread=ops)

    def ops(self, op: str, keys: int, tag: str) -> list:
        """One callable per client: a verified read of a filled key, or a write of a new key
        (``tag`` keeps each round's keys apart), as the bench's cases send them."""
        if op in LANGGRAPH_OPS:
            Round.tag = f"{self.name}-{tag}"
            return self.steppers[op]
        if op == "write":
            return [lambda i, c=c: c.put(f"{self.prefix}{tag}-{i}", content=BODY, headers={
                "content-type": "application/json"}).raise_for_status() for c in self.clients]
        return [lambda i, c=c: c.get(f"{self.prefix}k{i % keys}").raise_for_status()
                for c in self.clients]

    def round(self, op: str, keys: int, requests: int, tag: str) -> dict[str, float]:
        """One timed round: requests per second and CPU µs per request by thread group."""
        kids = _children(self.pid)
        before = _cpu(self.pid)
        kids_before = sum(sum(_cpu(k).values()) for k in kids)
        database_before = _database_cpu()
        switches_before = _switches(self.pid)
        m = measure(lambda i: None, requests, CONCURRENCY, per_thread=self.ops(op, keys, tag))
        after = _cpu(self.pid)
        switches = since(switches_before, _switches(self.pid))
        kids_after = sum(sum(_cpu(k).values()) for k in kids)
        database = _database_cpu() - database_before
        loop = after.get(self.pid, 0) - before.get(self.pid, 0)
        threads = since(before, after) - loop  # every thread but the event loop's
        per = 1e6 / requests
        return {"per_second": m.per_second, "event_loop": loop * per,
                "request_threads": threads * per,
                "background": (kids_after - kids_before) * per, "database": database * per,
                "switches": switches / requests, "p50_ms": m.p50_ms}


LANGGRAPH_OPS = {"step": "checkpoint-step", "batch-put": "store-batch-put"}


def _langgraph(stack: MemplaneStack, floor: list[httpx.Client]
               ) -> tuple[dict[str, list[Any]], dict[str, list[Any]], ExitStack]:
    """Each side's LangGraph operations, one per client: memplane's through
    ``MemplaneCheckpointer`` and ``MemplaneStore`` over the SDK (an agent key), the floor's
    as the langgraph case has it do the same."""
    import memplane
    from memplane.integrations.langgraph import MemplaneCheckpointer, MemplaneStore

    resources = ExitStack()
    with memplane.Client(stack.base_url, ADMIN_KEY) as admin:
        agent_key = admin.keys.create(role="agent", name="profile agent").api_key
    clients = [resources.enter_context(memplane.Client(stack.base_url, agent_key))
               for _ in range(CONCURRENCY)]
    ours = {"step": [step_op(MemplaneCheckpointer(c, user_id=f"bench-{t}"), t, Round)
                     for t, c in enumerate(clients)],
            "batch-put": [store_ops(MemplaneStore(c, semantic=False), "store-batch-put", t,
                                     Round) for t, c in enumerate(clients)]}
    theirs = {op: [floor_ops(c, case, t, Round) for t, c in enumerate(floor)]
              for op, case in LANGGRAPH_OPS.items()}
    return ours, theirs, resources


def _stats(rows: list[dict[str, float]]) -> dict[str, tuple[float, float, float]]:
    return {k: (min(r[k] for r in rows), statistics.median(r[k] for r in rows),
                max(r[k] for r in rows)) for k in rows[0]}


def _pyspy(served: Served, op: str, keys: int, requests: int, out: Path) -> tuple[Path, int]:
    raw = out / f"{served.name}-{op}.txt"
    spy = subprocess.Popen(["py-spy", "record", "--gil", "--threads", "--full-filenames",
                            "--nonblocking", "-r", str(RATE), "-f", "raw", "-o", str(raw),
                            "--pid", str(served.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           executable=str(Path(sys.executable).with_name("py-spy")))
    time.sleep(1.0)  # attached
    measure(lambda i: None, requests, CONCURRENCY,
            per_thread=served.ops(op, keys, "pyspy"))
    spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
    spy.wait(timeout=60)
    return raw, requests


_STATEMENTS = text(
    "SELECT calls, plans, total_plan_time, total_exec_time, rows, query FROM "
    "pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = "
    "current_database()) ORDER BY total_plan_time + total_exec_time DESC LIMIT 12")


def _statements(served: Served, engine: Engine, op: str, keys: int, requests: int
                ) -> list[tuple[float, float, float, float, float, str]]:
    """One round with the database's statement counters reset before it: (calls, plans made,
    µs planning, µs executing, rows) per request and the statement, the costliest first."""
    with engine.connect() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
        conn.execute(text("SELECT pg_stat_statements_reset()"))
        conn.commit()
    measure(lambda i: None, requests, CONCURRENCY,
            per_thread=served.ops(op, keys, "statements"))
    time.sleep(1.0)  # the sealer's next round: the audit rows these requests left
    with engine.connect() as conn:
        found = conn.execute(_STATEMENTS).all()
    return [(calls / requests, plans / requests, planning * 1000 / requests,
             spent * 1000 / requests, rows / requests, " ".join(query.split())[:150])
            for calls, plans, planning, spent, rows, query in found]


def _frame(frame: str) -> str:
    """``func (path:line)`` as ``path:func``, what :data:`PARTS` texts are found in."""
    func, _, where = frame.rpartition(" (")
    return f"{where.rsplit(':', 1)[0]}:{func}"


def parts_of(raw: Path, requests: int, rate: int = 0) -> dict[str, dict[str, float]]:
    """µs per request by thread group (the main thread is the event loop) and part."""
    rate = rate or RATE
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        group = "event loop" if frames[0].endswith("MainThread") else "request threads"
        part = "other"
        for frame in reversed(frames[1:]):
            named = _frame(frame)
            hit = next((name for name, text in PARTS if text in named), None)
            if hit:
                part = hit
                break
        by[group][part] += int(count)
    return {g: {p: n / rate / requests * 1e6 for p, n in c.most_common()} for g, c in by.items()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.served_profile")
    parser.add_argument("--op", choices=("read", "write", *LANGGRAPH_OPS), default="read")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--pyspy", type=Path)
    parser.add_argument("--statements", action="store_true",
                        help="PostgreSQL: each system's statements by the database's time")
    args = parser.parse_args()
    if args.statements and args.database != "postgres":
        parser.error("--statements reads PostgreSQL's pg_stat_statements: --database postgres")
    if args.pyspy and not Path(sys.executable).with_name("py-spy").exists():
        parser.error("--pyspy needs py-spy in this environment: .venv/bin/pip install py-spy")
    backends = Backends(postgres_settings=(
        "shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on")
        if args.statements else ())
    stacks = [MemplaneStack(backends, args.database, "local") for _ in range(2)]
    closing = ExitStack()
    try:
        stacks[0].serve()
        stacks[1].serve_floor()
        assert stacks[0].server is not None and stacks[1].floor_server is not None
        floor_clients = [stacks[1].floor_client() for _ in range(CONCURRENCY)]
        ours: dict[str, list[Any]] = {}
        theirs: dict[str, list[Any]] = {}
        if args.op in LANGGRAPH_OPS:
            ours, theirs, resources = _langgraph(stacks[0], floor_clients)
            closing.enter_context(resources)
        systems = [
            Served("memplane", stacks[0].server.pid,
                   [stacks[0].http_client() for _ in range(CONCURRENCY)],
                   "/v1/memories/user/bench/", ours),
            Served("floor", stacks[1].floor_server.pid, floor_clients, "/floor/", theirs),
        ]
        for s in systems:
            s.fill(args.keys)
        for stack in stacks:
            stack.analyze()
        stacks[0].settle()
        for s in systems:  # warm-up
            s.round(args.op, args.keys, 200, "warm")
        rows: dict[str, list[dict[str, float]]] = defaultdict(list)
        for r in range(args.rounds):
            for s in systems[r % 2:] + systems[:r % 2]:
                stacks[0].settle()
                rows[s.name].append(s.round(args.op, args.keys, args.requests, f"r{r}"))
        what = {"read": "verified reads", "write": "writes of new keys",
                "step": "LangGraph checkpoint steps",
                "batch-put": "LangGraph batches of 50 store puts"}[args.op]
        print(f"{args.database}+local, {what} at c{CONCURRENCY}, {args.rounds} rounds "
              f"of {args.requests}: min / median / max")
        for name, got in rows.items():
            for k, (lo, med, hi) in _stats(got).items():
                print(f"  {name:9} {k:16} {lo:9.1f} {med:9.1f} {hi:9.1f}")
        ratios = [m["per_second"] / f["per_second"] for m, f in zip(rows["memplane"],
                                                                    rows["floor"], strict=True)]
        print(f"  memplane / floor requests per second, per round: "
              f"{', '.join(f'{x:.3f}' for x in ratios)}")
        if args.pyspy:
            args.pyspy.mkdir(parents=True, exist_ok=True)
            for s in systems:
                stacks[0].settle()
                raw, n = _pyspy(s, args.op, args.keys, args.requests * 4, args.pyspy)
                print(f"py-spy, {s.name} ({raw}), µs per request:")
                for group, parts in parts_of(raw, n).items():
                    total = sum(parts.values())
                    print(f"  {group}: {total:.0f}")
                    for part, us in parts.items():
                        print(f"    {part:34} {us:7.1f}")
        if args.statements:
            for system, stack in zip(systems, stacks, strict=True):
                stacks[0].settle()
                print(f"statements, {system.name}, per request: calls, plans made, µs "
                      "planning, µs executing, rows")
                for calls, plans, planning, us, returned, query in _statements(
                        system, stack.runtime.engine, args.op, args.keys, args.requests):
                    print(f"  {calls:6.2f} {plans:6.2f} {planning:8.1f} {us:8.1f} "
                          f"{returned:7.2f}  {query}")
    finally:
        closing.close()
        for stack in stacks:
            stack.close()
        backends.close()


if __name__ == "__main__":
    main()
