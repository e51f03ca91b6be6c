"""The bars the HTTP, sustained, batch, LangGraph, export and scale cases are held to, read
from one run's results: each bar's figure, its bound and whether it holds; and information
rows (a figure with no bound: comparisons kept for the reader, bars no longer). ``python -m
bench`` prints them last and stores them under ``"bars"`` in its results file; a bar whose
case did not run (``--only``) is left out."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rich.table import Table

AT_LEAST, AT_MOST, BELOW, INFO = "≥", "≤", "<", "info"
_HOLDS: dict[str, Callable[[float, float], bool]] = {
    AT_LEAST: operator.ge, AT_MOST: operator.le, BELOW: operator.lt}


@dataclass(frozen=True)
class Bar:
    name: str
    figure: float
    relation: str  # AT_LEAST, AT_MOST, BELOW, or INFO (no bound: information only)
    bound: float
    what: str  # what the figure is

    @property
    def holds(self) -> bool | None:
        """Whether the figure is within its bound; None for an information row."""
        if self.relation == INFO:
            return None
        return _HOLDS[self.relation](self.figure, self.bound)

    def json(self) -> dict[str, Any]:
        return asdict(self) | {"holds": self.holds}


def _median(entry: Mapping[str, Any], key: str) -> float | None:
    found = entry.get(key)
    return None if found is None else float(found["median"])


def _over(entry: Mapping[str, Any], key: str) -> float | None:
    """``memplane`` over ``key``: a ratio of medians (the export case's)."""
    if entry.get(key) in (None, 0):
        return None
    return float(entry["memplane"]) / float(entry[key])


# The memory-quality case's bars: figure name -> (relation, bound, what it is).
_QUALITY = {
    "captured": (AT_LEAST, 0.8, "explicit statements whose value was stored (fraction)"),
    "stale_after_update": (AT_MOST, 0.0, "values replaced or deleted still current or in "
                                         "a later context"),
    "sensitive_stored": (AT_MOST, 0.0, "sensitive values found in what was written"),
}


def bars(results: Mapping[str, Mapping[str, Any]]) -> list[Bar]:
    out: list[Bar] = []

    def add(name: str, figure: float | None, relation: str, bound: float, what: str) -> None:
        if figure is not None:
            out.append(Bar(name, round(figure, 3), relation, bound, what))

    for stack in ("sqlite+local", "postgres+local"):
        for kind in ("write", "read"):
            for concurrency in (1, 16):
                name = f"{kind}/{stack}/http/c{concurrency}"
                if name in results:
                    add(name, _median(results[name], "vs_http_floor"), AT_LEAST, 0.8,
                        "memplane over HTTP ÷ the HTTP floor (median of per-round ratios)")
    for stack in ("sqlite+local", "postgres+local"):
        name = f"sustained-write/{stack}/http/c16"
        if name in results:
            add(name, _median(results[name], "vs_no_search"), AT_LEAST, 0.8,
                "writes/s until indexed and sealed ÷ the same writes searchable: false "
                "until sealed (median of per-round ratios)")
    for kind, peer_op in (("write", "put"), ("read", "get")):
        name = f"batch-{kind}/postgres+local/http/c16"
        if name in results:
            add(name, _median(results[name], "vs_peer"), AT_LEAST, 1.0,
                f"batched items/s ÷ LangGraph PostgresStore's in-process {peer_op} (median "
                "of per-round ratios)")
    for case, what in (("checkpoint-step", "checkpoint steps/s"),
                       ("store-batch-put", "batched store put items/s")):
        for concurrency in (1, 16):
            name = f"langgraph-{case}/postgres+local/http/c{concurrency}"
            if name in results:
                add(name, _median(results[name], "vs_floor"), AT_LEAST, 0.8,
                    f"{what} ÷ the HTTP floor doing the same (median of per-round ratios)")
    for case, key, what in (
            ("checkpoint-step", "p50_ratio", "step p50 ÷ PostgresSaver's (was a bar: ≤ 3)"),
            ("store-batch-put", "ratio", "items/s ÷ PostgresStore's (was a bar: ≥ 1.0)")):
        for concurrency in (1, 16):
            name = f"langgraph-{case}/postgres+local/http/c{concurrency}"
            if name in results:
                add(f"{name} ÷ peer", _median(results[name], key), INFO, 0.0, what)
    for name, entry in results.items():
        if name.startswith("export/") and name.endswith("/peak_rss_growth"):
            add(name, float(entry["memplane"]), BELOW, float(entry["bar"]),
                "MiB of the export process's peak RSS growth")
    for name, entry in results.items():  # the local bucket's: export/{items}x{size}/throughput
        if name.startswith("export/") and name.count("/") == 2 and name.endswith("/throughput"):
            add(name, _median(entry, "vs_same_work"), AT_LEAST, 0.8,
                "export MiB/s ÷ a minimal script doing the same crypto and packing work on "
                "the same cores, local bucket (median of per-round ratios)")
    for name, bound in (("scale/get_latency_1M_vs_10k", 1.2),
                        ("scale/list_scope_latency_1M_vs_10k", 1.5)):
        if name in results:
            add(name, _median(results[name], "ratio"), AT_MOST, bound,
                "latency at a million pointers ÷ at 10,000 (median of per-round ratios)")
    for name, entry in results.items():
        if name.startswith("audit-tree/sealer_cpu_per_row/"):
            add(name, _median(entry, "ratio"), AT_MOST, 1.2,
                "sealer CPU per row with the Merkle tree ÷ the chain alone (median of "
                "per-round ratios)")
    for name, entry in results.items():
        if name.startswith("memory-quality/"):
            figure, what = float(entry["memplane"]), _QUALITY.get(name.rsplit("/", 1)[1])
            if what is not None:
                add(name, figure, what[0], what[1], what[2])
    name = "audit-tree/inclusion_proof_1M/postgres/http"
    if name in results:
        add(name, float(results[name]["memplane"]), BELOW, 10.0,
            "ms p50 of GET /v1/audit/proof/inclusion at a million sealed rows")
    return out


def table(found: list[Bar]) -> Table:
    shown = Table(title="bars (one run)")
    for column in ("bar", "figure", "bound", "holds", "figure is"):
        shown.add_column(column, justify="left" if column in ("bar", "figure is") else "right")
    for bar in found:
        figure = f"{bar.figure:.3f}" if bar.figure < 10 else f"{bar.figure:.1f}"
        if bar.holds is None:
            shown.add_row(bar.name, figure, "-", "info", bar.what)
            continue
        shown.add_row(bar.name, figure, f"{bar.relation} {bar.bound:g}",
                      "yes" if bar.holds else "NO", bar.what)
    return shown
