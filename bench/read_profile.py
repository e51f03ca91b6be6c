"""Where a served verified read's CPU goes, against the HTTP floor's.

``python -m bench.read_profile [--database sqlite|postgres] [--rounds 4] [--reads 800]
[--pyspy DIR]`` serves memplane (``memplane serve``) and the HTTP floor
(``bench/http_floor.py``), each on a database and bucket of its own as ``python -m bench``
does, writes ``--keys`` 1 KiB values to each, then alternates rounds of verified reads at 16
clients (each system first in turn). Per round and system it reads the server's CPU per
request by thread from ``/proc/PID/task`` — the event loop (the main thread), the request
threads (everything else in the server's process) and memplane's background process (sealer
and indexer) — and prints the medians in µs per request. With ``--pyspy DIR`` one more round
of each runs under ``py-spy record --gil --threads -f raw`` (the thread holding the
interpreter, 1,000 Hz: a one-process server is bound by it), and the
samples are summed by thread and by the parts named in :data:`PARTS`, in µs per request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import psutil

from .cases import BODY
from .harness import measure
from .stacks import Backends, MemplaneStack

CONCURRENCY = 16
RATE = 1000  # py-spy samples per second
_TICK = os.sysconf("SC_CLK_TCK")

# Parts of a request, found by the innermost frame whose function name (file:function)
# contains the text: the first match from the leaf wins. Order: most specific first.
PARTS: list[tuple[str, str]] = [
    ("object fetch (bucket read)", "storage_adapters/local"),
    ("decrypt (AES-GCM)", "envelope.py:"),
    ("decrypt (AES-GCM)", "cryptography/"),
    ("SHA-256 check", "sha256_hex"),
    ("lookup statement (driver)", "direct.py:"),
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
    ("memplane read path", "memories/"),
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


def _children(pid: int) -> list[int]:
    return [c.pid for c in psutil.Process(pid).children(recursive=True)]


class Served:
    """One server under test: its process, its clients, its keys."""

    def __init__(self, name: str, pid: int, clients: list[httpx.Client], prefix: str) -> None:
        self.name, self.pid, self.clients, self.prefix = name, pid, clients, prefix

    def fill(self, keys: int) -> None:
        ops = [lambda i, c=c: c.put(f"{self.prefix}k{i}", content=BODY, headers={
            "content-type": "application/json"}).raise_for_status() for c in self.clients]
        measure(lambda i: None, keys, CONCURRENCY, per_thread=ops)

    def reads(self, keys: int) -> list:
        return [lambda i, c=c: c.get(f"{self.prefix}k{i % keys}").raise_for_status()
                for c in self.clients]

    def round(self, keys: int, reads: int) -> dict[str, float]:
        """One timed round: reads per second and CPU µs per request by thread group."""
        kids = _children(self.pid)
        before = _cpu(self.pid)
        kids_before = sum(sum(_cpu(k).values()) for k in kids)
        m = measure(lambda i: None, reads, CONCURRENCY, per_thread=self.reads(keys))
        after = _cpu(self.pid)
        kids_after = sum(sum(_cpu(k).values()) for k in kids)
        loop = after.get(self.pid, 0) - before.get(self.pid, 0)
        threads = sum(v - before.get(t, 0) for t, v in after.items() if t != self.pid)
        per = 1e6 / reads
        return {"per_second": m.per_second, "event_loop": loop * per,
                "request_threads": threads * per, "background": (kids_after - kids_before) * per,
                "p50_ms": m.p50_ms}


def _stats(rows: list[dict[str, float]]) -> dict[str, tuple[float, float, float]]:
    return {k: (min(r[k] for r in rows), statistics.median(r[k] for r in rows),
                max(r[k] for r in rows)) for k in rows[0]}


def _pyspy(served: Served, keys: int, reads: int, out: Path) -> tuple[Path, int]:
    raw = out / f"{served.name}.txt"
    spy = subprocess.Popen(["py-spy", "record", "--gil", "--threads", "--full-filenames",
                            "--nonblocking", "-r", str(RATE), "-f", "raw", "-o", str(raw),
                            "--pid", str(served.pid)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           executable=str(Path(sys.executable).with_name("py-spy")))
    time.sleep(1.0)  # attached
    measure(lambda i: None, reads, CONCURRENCY, per_thread=served.reads(keys))
    spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
    spy.wait(timeout=60)
    return raw, reads


def _frame(frame: str) -> str:
    """``func (path:line)`` as ``path:func``, what :data:`PARTS` texts are found in."""
    func, _, where = frame.rpartition(" (")
    return f"{where.rsplit(':', 1)[0]}:{func}"


def parts_of(raw: Path, reads: int, rate: int = 0) -> dict[str, dict[str, float]]:
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
    return {g: {p: n / rate / reads * 1e6 for p, n in c.most_common()} for g, c in by.items()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read_profile")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--reads", type=int, default=800)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--pyspy", type=Path)
    args = parser.parse_args()
    if args.pyspy and not Path(sys.executable).with_name("py-spy").exists():
        parser.error("--pyspy needs py-spy in this environment: .venv/bin/pip install py-spy")
    backends = Backends()
    stacks = [MemplaneStack(backends, args.database, "local") for _ in range(2)]
    try:
        stacks[0].serve()
        stacks[1].serve_floor()
        assert stacks[0].server is not None and stacks[1].floor_server is not None
        systems = [
            Served("memplane", stacks[0].server.pid,
                   [stacks[0].http_client() for _ in range(CONCURRENCY)],
                   "/v1/memories/user/bench/"),
            Served("floor", stacks[1].floor_server.pid,
                   [stacks[1].floor_client() for _ in range(CONCURRENCY)], "/floor/"),
        ]
        for s in systems:
            s.fill(args.keys)
        for s in stacks:
            s.analyze()
        stacks[0].settle()
        for s in systems:  # warm-up
            s.round(args.keys, 200)
        rows: dict[str, list[dict[str, float]]] = defaultdict(list)
        for r in range(args.rounds):
            for s in systems[r % 2:] + systems[:r % 2]:
                stacks[0].settle()
                rows[s.name].append(s.round(args.keys, args.reads))
        print(f"{args.database}+local, verified reads at c{CONCURRENCY}, {args.rounds} rounds "
              f"of {args.reads}: min / median / max")
        for name, got in rows.items():
            for k, (lo, med, hi) in _stats(got).items():
                print(f"  {name:9} {k:16} {lo:9.1f} {med:9.1f} {hi:9.1f}")
        ratios = [m["per_second"] / f["per_second"] for m, f in zip(rows["memplane"],
                                                                    rows["floor"], strict=True)]
        print(f"  memplane / floor reads per second, per round: "
              f"{', '.join(f'{x:.3f}' for x in ratios)}")
        if args.pyspy:
            args.pyspy.mkdir(parents=True, exist_ok=True)
            for s in systems:
                stacks[0].settle()
                raw, n = _pyspy(s, args.keys, args.reads * 4, args.pyspy)
                print(f"py-spy, {s.name} ({raw}), µs per request:")
                for group, parts in parts_of(raw, n).items():
                    total = sum(parts.values())
                    print(f"  {group}: {total:.0f}")
                    for part, us in parts.items():
                        print(f"    {part:34} {us:7.1f}")
    finally:
        for s in stacks:
            s.close()
        backends.close()


if __name__ == "__main__":
    main()
