"""python -m bench [--quick]: print a table, write bench/results/latest.json and
bench/results/<date>-<commit>.json (bench/results_file.py), end with one JSON line mapping
each case to {"memplane", "floor", "peer", "unit"}."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from rich.console import Console

from . import batch, events, results_file, stacks
from .bars import bars, table
from .cases import run_all


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="fewer operations per case")
    parser.add_argument("--only", default="", help="comma-separated case name prefixes")
    parser.add_argument("--minutes", type=float, default=20.0,
                        help="the soak's length (run only with --only soak)")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes of each `memplane serve` (docs/workers.md)")
    args = parser.parse_args()
    stacks.WORKERS = args.workers
    logging.disable(logging.WARNING)
    only = [p for p in args.only.split(",") if p]
    if only == ["soak"]:  # 20 minutes by default: never part of a full bench run
        from .soak import report

        return report(args.minutes)
    results: dict[str, Any] = {}

    def save() -> None:
        """The results so far, bars included, in both files: a run stopped midway (a
        machine too busy to finish) still leaves what it measured."""
        results["bars"] = {bar.name: bar.json() for bar in bars(results)}
        results_file.write(results, argv=sys.argv[1:])

    def wanted(case: str) -> bool:
        return not only or any(case.startswith(p) for p in only)

    # The cases with bars on memplane's own speed first, the slow fills (scale, audit tree)
    # last.
    results |= run_all(quick=args.quick, only=only, others=False)
    save()
    if wanted("batch"):
        results |= batch.run(quick=args.quick)
        save()
    if wanted("langgraph"):
        from .langgraph import run as langgraph_case

        results |= langgraph_case(quick=args.quick)
        save()
    results |= run_all(quick=args.quick, only=only, stacks=False)
    save()
    if wanted("event-ingest"):
        results |= events.run(quick=args.quick)
    if not only or "compactor" in only:
        from .compactor import run as compactor_case

        results |= compactor_case(quick=args.quick)
    if wanted("audit-tree"):
        from .audit_tree import run as audit_tree_case

        results |= audit_tree_case(quick=args.quick)
        save()
    if wanted("memory-quality"):
        from .memory_quality import run as memory_quality_case

        results |= memory_quality_case(quick=args.quick)
    results.pop("bars", None)
    found = bars(results)
    Console(stderr=True, width=180).print(table(found))
    results["bars"] = {bar.name: bar.json() for bar in found}
    _, dated = results_file.write(results, argv=sys.argv[1:])
    Console(stderr=True).print(f"results: {dated} (commit it with the docs that quote it)")
    print(json.dumps(results, separators=(",", ":")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
