"""``python -m tests.crashstates [--quick]``: record each workload, check every crash state
its log allows (tests/crashstates/model.py: the persistence model and the bound), and print
how many states were checked and what was found. Exit 1 if anything was."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from .runner import LARGER, WORKLOADS, explore


def main(argv: list[str]) -> int:
    chosen = dict(WORKLOADS) if "--quick" in argv else {**WORKLOADS, **LARGER}
    total_states = total_ops = 0
    found = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crashstates-") as tmp:
        for n, (name, steps) in enumerate(chosen.items()):
            outcome = explore(name, steps, Path(tmp) / f"{n}-{name}")
            total_states += outcome.states
            total_ops += outcome.operations
            print(f"{name:18} {outcome.operations:4} operations {outcome.states:5} crash states"
                  f"  {len(outcome.findings)} finding(s)", flush=True)
            for finding, where in outcome.findings.items():
                found += 1
                print(f"    {finding}  ({len(where)} states, e.g. {where[0]})")
    print(f"{len(chosen)} workloads, {total_ops} recorded operations, {total_states} distinct "
          f"crash states checked, {found} finding(s), {time.monotonic() - started:.0f} s")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
