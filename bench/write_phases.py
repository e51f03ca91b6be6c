"""Where a single-memory write's time goes, in process, step by step: the lookup (when the
write takes one), the seal, the bucket's put, the commit statement, and the rest.

    .venv/bin/python -m bench.write_phases [--writes 1000] [--stacks sqlite+local,postgres+local]

Each stack writes 1 KiB values to new keys of one user scope, as the bench's write case does
(``bench/cases.py``), twice: ``warm``, as a running server writes (what this process last saw
is remembered, ``memories/guesses.py``), and ``cold``, with that memory emptied before every
write, so that every write looks its address up first (what a server's first write of an
address on a cloud bucket does). Per step: wall and CPU (the calling thread's) in µs per
write, medians over three passes. A measurement, not a test: the steps are wrapped for timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from control_plane.memories import guesses, hotpath, hotpath_commit, write_fast
from storage_adapters.local import LocalAdapter
from storage_adapters.s3 import S3Adapter

from .cases import VALUE
from .stacks import Backends, MemplaneStack

STEPS = ("lookup", "seal", "put", "commit")


class Clock:
    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            w, c = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.wall[step] += time.perf_counter() - w
                self.cpu[step] += time.thread_time() - c
                self.calls[step] += 1
        return timed


@contextmanager
def timed_steps(clock: Clock) -> Iterator[None]:
    saved: list[tuple[Any, str]] = [(hotpath, "lookup_for_write"), (write_fast, "seal"),
                                    (LocalAdapter, "put"), (hotpath_commit, "commit_write"),
                                    (S3Adapter, "put")]
    originals = [getattr(owner, name) for owner, name in saved]
    for (owner, name), original, step in zip(saved, originals, (*STEPS, "put"), strict=True):
        setattr(owner, name, clock.wrap(step, original))
    try:
        yield
    finally:
        for (owner, name), original in zip(saved, originals, strict=True):
            setattr(owner, name, original)


def one_pass(stack: MemplaneStack, tag: str, n: int, cold: bool) -> dict[str, Any]:
    clock = Clock()
    total = clock.wrap("write", stack.set)
    with timed_steps(clock):
        for i in range(n):
            if cold:
                guesses._ROWS.clear()
                guesses._KEYS.clear()
            total(f"{tag}-{i}", VALUE)
    out: dict[str, Any] = {}
    for step in ("write", *STEPS):
        out[step] = (clock.wall[step] / n * 1e6, clock.cpu[step] / n * 1e6,
                     clock.calls[step] / n)
    rest_wall = out["write"][0] - sum(out[s][0] for s in STEPS)
    rest_cpu = out["write"][1] - sum(out[s][1] for s in STEPS)
    out["rest"] = (rest_wall, rest_cpu, 1.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--stacks", default="sqlite+local,postgres+local")
    args = parser.parse_args()
    backends = Backends()
    try:
        for name in args.stacks.split(","):
            database, bucket = name.split("+")
            stack = MemplaneStack(backends, database, bucket)
            try:
                for i in range(64):  # warm-up: connections, caches, the subject's key
                    stack.set(f"warm-{i}", VALUE)
                stack.analyze()
                results: dict[str, list[dict[str, Any]]] = {"warm": [], "cold": []}
                for p in range(args.passes):
                    for mode in ("warm", "cold") if p % 2 == 0 else ("cold", "warm"):
                        results[mode].append(one_pass(stack, f"{mode}{p}", args.writes,
                                                      mode == "cold"))
                for mode, passes in results.items():
                    print(f"\n{name} {mode} ({args.writes} writes x {args.passes} passes; "
                          "µs per write, median of passes [min-max]; calls per write)")
                    for step in ("write", *STEPS, "rest"):
                        walls = [p[step][0] for p in passes]
                        cpus = [p[step][1] for p in passes]
                        calls = statistics.median(p[step][2] for p in passes)
                        print(f"  {step:7s} wall {statistics.median(walls):7.0f} "
                              f"[{min(walls):.0f}-{max(walls):.0f}]  cpu "
                              f"{statistics.median(cpus):6.0f}  calls {calls:.2f}")
            finally:
                stack.close()
    finally:
        backends.close()


if __name__ == "__main__":
    main()
