"""The event-ingest case of ``python -m bench``: raw events appended per second against
memory writes per second on the same stack (SQLite + local bucket, PostgreSQL + local
bucket), in-process, at 1 and 16 threads, best of three alternating rounds. Both write a
~1 KiB body, sealed, object first, then the row and its audit row; the ratio is events/s
over memory writes/s."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from control_plane.events import service as events
from control_plane.events.schemas import EventIn

from .harness import measure
from .stacks import Backends, MemplaneStack

BODY = "## Call summary\n" + "- decided to raise the ROAS target; next review in May.\n" * 18
VALUE = {"text": BODY}
STACKS = [("sqlite", "local"), ("postgres", "local")]
# Events spread over this many entities, as a tenant's automations would write them.
ENTITIES = 50
ROUNDS = 3


def _append(stack: MemplaneStack, i: int) -> None:
    spec = EventIn.model_validate({"scope": "entity", "scope_ref": f"ent_{i % ENTITIES}",
                                   "kind": "call_summary", "body": BODY, "source": "call",
                                   "source_ref": f"call-{i}"})
    with stack.runtime.sessions() as session:
        events.append_event(session, stack.runtime.plane, stack.actor, spec)


def run(*, quick: bool) -> dict[str, dict[str, Any]]:
    console = Console(stderr=True)
    table = Table(title="event ingest vs memory writes (ops/s, higher is better)")
    for column in ("case", "events/s", "memory writes/s", "ratio", "events p50 ms",
                   "writes p50 ms"):
        table.add_column(column, justify="right" if column != "case" else "left")
    results: dict[str, dict[str, Any]] = {}
    backends = Backends()
    try:
        for database, bucket in STACKS:
            stack = MemplaneStack(backends, database, bucket)
            try:
                # warm up: the subject keys of the scopes exist, caches are filled
                for i in range(ENTITIES):
                    _append(stack, i)
                stack.set("warm", VALUE)
                for concurrency in (1, 16):
                    n = (150 if quick else 1000) * (2 if concurrency > 1 else 1)
                    # The two alternate, each keeping its best round: the machine is shared.
                    writes = appended = None
                    for r in range(ROUNDS):
                        w = measure(lambda i, c=concurrency, s=stack, r=r:
                                    s.set(f"m{c}-{r}-{i}", VALUE), n, concurrency)
                        a = measure(lambda i, s=stack: _append(s, i), n, concurrency)
                        writes = w if writes is None or w.per_second > writes.per_second \
                            else writes
                        appended = a if appended is None or a.per_second > appended.per_second \
                            else appended
                    assert writes is not None and appended is not None
                    name = f"event-ingest/{database}+{bucket}/c{concurrency}"
                    results[name] = {"memplane": round(appended.per_second, 1),
                                     "floor": round(writes.per_second, 1), "peer": None,
                                     "unit": "events/s vs memory writes/s"}
                    table.add_row(name, f"{appended.per_second:,.0f}",
                                  f"{writes.per_second:,.0f}",
                                  f"{appended.per_second / writes.per_second:.2f}",
                                  f"{appended.p50_ms:.2f}", f"{writes.p50_ms:.2f}")
                    console.print(f"done {name}")
            finally:
                stack.close()
    finally:
        backends.close()
    console.print(table)
    return results
