"""``python -m tests.crashstates [--quick] [--postgres]``: record each workload, check every
crash state its log allows (tests/crashstates/model.py: the persistence model and the bound),
and print how many states were checked and what was found. Exit 1 if anything was.
``--postgres``: the control plane on PostgreSQL (a durable throwaway server,
tests/support/postgres.py, or ``MEMPLANE_TEST_DURABLE_DATABASE_URL``) instead of SQLite."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from tests.support.postgres import ExternalPostgres, PostgresCluster

from . import pgsnap
from .runner import LARGER, WORKLOADS, explore


@contextlib.contextmanager
def databases(postgres: bool) -> Iterator[Iterator[str]]:
    """Each workload's control-plane database: "sqlite", or a clone of a migrated one."""
    if not postgres:
        yield iter(lambda: "sqlite", None)
        return
    external = os.environ.get("MEMPLANE_TEST_DURABLE_DATABASE_URL")
    server = ExternalPostgres(external) if external else PostgresCluster(durable=True).start()
    try:
        template = server.create_database()
        engine = make_engine(template)
        upgrade(engine)
        engine.dispose()
        yield iter(lambda: pgsnap.clone(template), None)
    finally:
        if isinstance(server, PostgresCluster):
            server.stop()


def main(argv: list[str]) -> int:
    chosen = dict(WORKLOADS) if "--quick" in argv else {**WORKLOADS, **LARGER}
    total_states = total_ops = 0
    found = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="crashstates-") as tmp, \
            databases("--postgres" in argv) as each:
        for n, (name, steps) in enumerate(chosen.items()):
            database = next(each)
            outcome = explore(name, steps, Path(tmp) / f"{n}-{name}", database)
            if database != "sqlite":
                pgsnap.drop(database)
            total_states += outcome.states
            total_ops += outcome.operations
            print(f"{name:18} {outcome.operations:4} operations {outcome.commits:3} commits "
                  f"{outcome.states:5} crash states  {len(outcome.findings)} finding(s)",
                  flush=True)
            for finding, where in outcome.findings.items():
                found += 1
                print(f"    {finding}  ({len(where)} states, e.g. {where[0]})")
    print(f"{len(chosen)} workloads, {total_ops} recorded operations, {total_states} distinct "
          f"crash states checked, {found} finding(s), {time.monotonic() - started:.0f} s")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
