"""The sustained write case: writes over HTTP timed until the server has settled.

The other cases keep the server's background work out of their timed windows (``settle()``
before each measurement): a write is timed until it is answered, and the search indexer and
audit sealer then work on it untimed. Here the clock runs from the first write until every
memory written has its vector and every audit row is sealed: writes per second with the
background work they caused counted in.

Two systems on the same ``memplane serve`` (same process shape: the indexer and the sealer in
its background process), in an order rotated per round:

- ``search``: 1 KiB writes as the other cases send them (searchable, the default): each is
  indexed for search and its audit row sealed;
- ``no_search``: the same writes sent with ``"searchable": false`` (the API's own switch: a
  memory never embedded, never a search hit), so the indexer has nothing to do and only the
  sealing remains: "the same without search".

Reported per system: writes/s until answered (settled-excluded, as the other cases) and until
settled (sustained), the median settle tail, and both ratios as medians of per-round ratios.
The bar (``bench/bars.py``): sustained ``search`` ≥ 0.8× sustained ``no_search``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from .harness import Measurement, measure, ratio_of_rounds, rotated, summarize
from .stacks import Backends, MemplaneStack

VALUE = {"text": "x" * 1000}
BODIES = {"search": json.dumps({"value": VALUE}, separators=(",", ":")).encode(),
          "no_search": json.dumps({"value": VALUE, "searchable": False},
                                  separators=(",", ":")).encode()}
STACKS = ("sqlite+local", "postgres+local")
CONCURRENCY = 16
ROUNDS = 5
POLL = 0.005  # seconds between checks of a timed settle


def ops_per_round(quick: bool) -> int:
    """Long enough that the rounds are more than the settle tail (the sealer's interval is
    0.5 s): 50 writes per thread with --quick, 250 in full."""
    return CONCURRENCY * (50 if quick else 250)


def timed(settle: Callable[[], object], run: Callable[[], Measurement],
          clock: Callable[[], float] = time.perf_counter) -> Measurement:
    """``run``'s measurement with the time ``settle`` then took: how long after the last
    operation the server's background work on them was done."""
    measured = run()
    started = clock()
    settle()
    return measured.settled(clock() - started)


def entry(runs: dict[str, list[Measurement]], n: int) -> dict[str, Any]:
    """The case's results from each system's rounds (``search``, ``no_search``)."""
    search, plain = runs["search"], runs["no_search"]

    def median(ms: list[Measurement], sustained: bool) -> float:
        return round(summarize([m.sustained_per_second if sustained else m.per_second
                                for m in ms]).median, 1)

    return {
        "memplane": median(search, True), "no_search": median(plain, True),
        "memplane_settled_excluded": median(search, False),
        "no_search_settled_excluded": median(plain, False),
        "settle_seconds": {name: round(summarize([m.settle_seconds for m in ms]).median, 3)
                           for name, ms in runs.items()},
        "vs_no_search": ratio_of_rounds(search, plain, sustained=True).json(),
        "vs_no_search_settled_excluded": ratio_of_rounds(search, plain).json(),
        "spread": {name: summarize([m.sustained_per_second for m in ms]).json()
                   for name, ms in runs.items()},
        "unit": "ops/s", "rounds": len(search), "ops_per_round": n,
        "concurrency": CONCURRENCY,
    }


def run(stack: MemplaneStack, stack_name: str, *, quick: bool) -> dict[str, dict[str, Any]]:
    """The case on ``stack``'s running server; its results under
    ``sustained-write/{stack_name}/http/c16``."""
    n = ops_per_round(quick)
    clients = [stack.http_client() for _ in range(CONCURRENCY)]
    try:
        def system(name: str, tag: str) -> list[Callable[[int], object]]:
            body = BODIES[name]

            def write(client: Any) -> Callable[[int], object]:
                return lambda i: client.put(
                    f"/v1/memories/user/bench/sus-{name}-{tag}-{i}", content=body,
                    headers={"content-type": "application/json"}).raise_for_status()
            return [write(c) for c in clients]

        for name in BODIES:  # warm-up: connections and code paths of both bodies
            measure(lambda i: None, 4 * CONCURRENCY, CONCURRENCY,
                    per_thread=system(name, "warm"))
        runs: dict[str, list[Measurement]] = {name: [] for name in BODIES}
        for r in range(ROUNDS):
            for name in rotated(list(BODIES), r):
                stack.settle()  # untimed: what the round before left
                ops = system(name, f"r{r}")
                runs[name].append(timed(
                    lambda: stack.settle(poll=POLL),
                    lambda ops=ops: measure(lambda i: None, n, CONCURRENCY, per_thread=ops)))
    finally:
        for client in clients:
            client.close()
    name = f"sustained-write/{stack_name}/http/c{CONCURRENCY}"
    result = entry(runs, n)
    _print(name, result)
    return {name: result}


def _print(name: str, e: dict[str, Any]) -> None:
    table = Table(title=f"sustained writes (ops/s, median of {ROUNDS} rotated rounds; ratios: "
                        "median of per-round ratios)")
    for column in ("case", "search: sustained", "no search: sustained", "ratio",
                   "search: answered", "no search: answered", "ratio", "settle s (search / no)"):
        table.add_column(column, justify="right" if column != "case" else "left")
    table.add_row(name, f"{e['memplane']:,.0f}", f"{e['no_search']:,.0f}",
                  f"{e['vs_no_search']['median']:.3f}", f"{e['memplane_settled_excluded']:,.0f}",
                  f"{e['no_search_settled_excluded']:,.0f}",
                  f"{e['vs_no_search_settled_excluded']['median']:.3f}",
                  f"{e['settle_seconds']['search']:.2f} / {e['settle_seconds']['no_search']:.2f}")
    Console(stderr=True, width=180).print(table)


def main() -> None:
    """``python -m bench.sustained [sqlite|postgres]``: the case alone on a server of its
    own (the full bench runs it after its stack's other cases)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("database", nargs="?", choices=("sqlite", "postgres"),
                        default="postgres")
    parser.add_argument("--full", action="store_true", help="250 writes per client, not 50")
    args = parser.parse_args()
    backends = Backends()
    try:
        stack = MemplaneStack(backends, args.database, "local")
        try:
            stack.serve()
            run(stack, f"{args.database}+local", quick=not args.full)
        finally:
            stack.close()
    finally:
        backends.close()


if __name__ == "__main__":
    main()
