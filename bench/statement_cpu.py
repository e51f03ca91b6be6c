"""The client's CPU for one hot-path statement on PostgreSQL: a verified read's lookup that
appends its audit row (``hotpath.READ_LOGGED_POSTGRES``), run as the server runs it
(``db.direct.run``: a pooled connection, switched to autocommit and back) against the least
the driver needs (one connection held in autocommit, one cursor, the row type made once).

``python -m bench.statement_cpu [--calls 2000] [--passes 4]`` starts PostgreSQL, writes 50
memories through memplane's service and prints, per pass, the CPU (``time.thread_time``) per
call of each way, alternating in one process. What separates the two is the pool's checkout
and return and the autocommit switches: the part of a statement's CPU no statement saves.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from typing import Any

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db import direct
from control_plane.db.base import utcnow
from control_plane.memories import hotpath
from control_plane.memories.write_request import address_params

from .stacks import Backends, MemplaneStack

KEYS = 50


def _params(stack: MemplaneStack) -> list[dict[str, Any]]:
    for i in range(KEYS):
        stack.set(f"k{i}", {"text": "x" * 1000})
    stack.analyze()
    return [address_params(stack.actor.tenant_id,
                           MemoryAddress.parse(Scope.user, "bench", f"k{i}")) | {
        "v_expected_key": uuid.uuid4(), "v_accessor_type": "key", "v_accessor_id": "bench",
        "v_accessor_agent": None, "v_detail": "d", "v_request_id": None, "v_now": utcnow()}
        for i in range(KEYS)]


def _per_call(call: Callable[[dict[str, Any]], object], params: list[dict[str, Any]],
              calls: int) -> float:
    started = time.thread_time()
    for i in range(calls):
        call(params[i % KEYS])
    return (time.thread_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.statement_cpu")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args()
    from psycopg.rows import namedtuple_row

    backends = Backends()
    stack = MemplaneStack(backends, "postgres", "local")
    try:
        params = _params(stack)
        engine = stack.runtime.engine
        compiled = direct._compile(engine, hotpath.READ_LOGGED_POSTGRES)
        held = engine.raw_connection()
        driver = held.driver_connection
        assert driver is not None
        driver.autocommit = True
        cursor = driver.cursor()
        cursor.execute(compiled.string, direct._named_values(compiled, params[0]))
        make = namedtuple_row(cursor)

        def served(values: dict[str, Any]) -> object:
            return direct.run(engine, hotpath.READ_LOGGED_POSTGRES, values)

        def least(values: dict[str, Any]) -> object:
            cursor.execute(compiled.string, direct._named_values(compiled, values))
            return [make(row) for row in cursor.fetchall()]

        for way in (served, least):  # warm: statements prepared on both connections
            _per_call(way, params, 500)
        for number in range(1, args.passes + 1):
            print(f"pass {number}: db.direct.run {_per_call(served, params, args.calls):.1f} "
                  f"µs CPU per call, a held connection and cursor "
                  f"{_per_call(least, params, args.calls):.1f}", flush=True)
        cursor.close()
        driver.autocommit = False
        held.close()
    finally:
        stack.close()
        backends.close()


if __name__ == "__main__":
    main()
