"""The cost of encryption at rest: set and verified get per second, with and without it.

In-process (services over SQLite and the local bucket, no HTTP), one thread, same machine,
same values; prints one line per mode and the ratio. Not a test.

    .venv/bin/python bench/encryption_cost.py [--n 2000] [--size 512]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from control_plane.addresses import MemoryAddress, Scope
from control_plane.identity import Actor
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import create_tenant


def run(encryption: bool, n: int, size: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(Settings(data_dir=Path(tmp), encryption=encryption,
                                   sqlite_synchronous="NORMAL", run_background=False))
        runtime.migrate()
        try:
            with runtime.sessions() as session:
                tenant, _ = create_tenant(session, "bench")
            actor = Actor(tenant.id, "api", "bench")
            value = "x" * size
            addresses = [MemoryAddress.parse(Scope.user, f"u{i % 50}", f"k{i}") for i in range(n)]
            with runtime.sessions() as session:  # warm up: keys created, caches filled
                for address in addresses[:50]:
                    memories.set_value(session, runtime.plane, actor, address, value,
                                       MemoryMeta())
            started = time.perf_counter()
            with runtime.sessions() as session:
                for address in addresses:
                    memories.set_value(session, runtime.plane, actor, address, value,
                                       MemoryMeta())
            sets = n / (time.perf_counter() - started)
            started = time.perf_counter()
            with runtime.sessions() as session:
                for address in addresses:
                    memories.get_value(session, runtime.plane, actor, address)
            gets = n / (time.perf_counter() - started)
            return sets, gets
        finally:
            runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # Modes alternate and each keeps its best round: the machine is shared and noisy.
    best: dict[bool, tuple[float, float]] = {False: (0.0, 0.0), True: (0.0, 0.0)}
    for _ in range(args.rounds):
        for encryption in (False, True):
            sets, gets = run(encryption, args.n, args.size)
            best[encryption] = (max(best[encryption][0], sets), max(best[encryption][1], gets))
    results = best
    for encryption in (False, True):
        sets, gets = results[encryption]
        print(f"encryption={'on ' if encryption else 'off'}  set/s {sets:8.0f}  "
              f"get/s {gets:8.0f}  ({args.n} values of {args.size} bytes, best of "
              f"{args.rounds})")
    (s0, g0), (s1, g1) = results[False], results[True]
    print(f"encrypted / plaintext: set {s1 / s0:.2f}x, get {g1 / g0:.2f}x")


if __name__ == "__main__":
    main()
