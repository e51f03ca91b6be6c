"""A cosmic-ray filter for ``scripts/mutation``: with ``MUTATION_OPERATORS=PATTERN``, runs only
the mutants of the operators whose name matches ``PATTERN`` (a regular expression searched in
the name, case-insensitively: ``exception`` keeps ``core/ExceptionReplacer``). Every other
pending mutant of the session is marked SKIPPED with the output ``operator``, the way the
annotation filter marks its own, so the summary counts them apart.

Run with the mutation venv's Python (it imports cosmic-ray): ``python mutation_operators.py
SESSION PATTERN``.
"""

from __future__ import annotations

import re
import sys
from typing import Any


def keep_only(db: Any, pattern: str) -> tuple[int, int]:
    """Mark every pending mutant of a cosmic-ray ``WorkDB`` none of whose mutations is of an
    operator matching ``pattern`` as skipped; return (kept, marked)."""
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    wanted = re.compile(pattern, re.IGNORECASE)
    done = {job_id for job_id, _ in db.results}
    kept = marked = 0
    for item in db.work_items:
        if item.job_id in done:
            continue
        if any(wanted.search(m.operator_name) for m in item.mutations):
            kept += 1
            continue
        db.set_result(item.job_id, WorkResult(output="operator", test_outcome=None, diff=None,
                                              worker_outcome=WorkerOutcome.SKIPPED))
        marked += 1
    return kept, marked


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(argv[0], WorkDB.Mode.open) as db:
        kept, marked = keep_only(db, argv[1])
    print(f"MUTATION_OPERATORS={argv[1]}: {kept} mutants kept, {marked} of other operators"
          " not run")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
