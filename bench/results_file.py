"""A run's results on disk: ``bench/results/latest.json`` (everything, not committed) and
``bench/results/<date>-<commit>.json`` (small: long texts and lists trimmed), the file a
document quoting the run's figures commits beside it."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TEXT_LIMIT = 600  # characters of a string kept (EXPLAIN plans are the long ones)
LIST_LIMIT = 40  # items of a list kept


def trimmed(value: Any) -> Any:
    """``value`` with every string longer than TEXT_LIMIT and every list longer than
    LIST_LIMIT cut, saying how much was left out."""
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + f" … ({len(value) - TEXT_LIMIT} characters trimmed)"
    if isinstance(value, list) and len(value) > LIST_LIMIT:
        return [trimmed(v) for v in value[:LIST_LIMIT]] + [
            f"… ({len(value) - LIST_LIMIT} items trimmed)"]
    if isinstance(value, list):
        return [trimmed(v) for v in value]
    if isinstance(value, dict):
        return {k: trimmed(v) for k, v in value.items()}
    return value


def _commit(checkout: Path) -> str:
    try:
        found = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=checkout,
                               capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=checkout, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return found + ("-dirty" if dirty else "")


def name_of(when: datetime, commit: str, run: int = 1) -> str:
    """The dated file's name; a later run of the same commit on the same day is ``-runN``."""
    return f"{when:%Y-%m-%d}-{commit}{'' if run == 1 else f'-run{run}'}.json"


def _free_name(out: Path, when: datetime, commit: str) -> str:
    """The first name no earlier run wrote: two runs of one commit keep a file each."""
    run = 1
    while (out / name_of(when, commit, run)).exists():
        run += 1
    return name_of(when, commit, run)


# The run's commit and file name, taken at its first write (the code that ran: commits made
# while a long run goes on do not rename its file), and the load average at each write.
_RUN: dict[str, Any] = {}


def write(results: dict[str, Any], *, argv: list[str],
          out: Path | None = None) -> tuple[Path, Path]:
    """Write both files; their paths (latest, dated)."""
    out = out or Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    when = datetime.now(UTC)
    if "commit" not in _RUN:
        commit = _commit(Path(__file__).resolve().parent.parent)
        _RUN.update(commit=commit, loads=[], name=_free_name(out, when, commit))
    _RUN["loads"].append([when.isoformat(timespec="seconds"),
                          *(round(x, 2) for x in os.getloadavg())])
    commit = _RUN["commit"]
    run = {"date": when.isoformat(timespec="seconds"), "commit": commit, "argv": argv,
           "cpus": os.cpu_count(), "load_average": _RUN["loads"][-1][1:],
           "load_averages": list(_RUN["loads"])}  # [time, 1, 5, 15 min] at each save
    latest = out / "latest.json"
    latest.write_text(json.dumps({"run": run} | results, indent=2))
    dated = out / _RUN["name"]
    dated.write_text(json.dumps({"run": run} | trimmed(results), indent=1) + "\n")
    return latest, dated


def _ratio(entry: dict[str, Any], key: str) -> str:
    found = entry.get(key)
    return f"{found['median']:.3f}" if isinstance(found, dict) else "-"


def _rate(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) else "-"


def markdown(results: dict[str, Any]) -> str:
    """The bars and the HTTP, sustained, batch and LangGraph cases of a results file as
    Markdown tables, as docs/performance.md quotes them
    (``python -m bench.results_file FILE``)."""
    out = ["| bar | figure | bound | holds |", "|---|--:|--:|---|"]
    for name, bar in results.get("bars", {}).items():
        info = bar["relation"] == "info"
        out.append(f"| {name} | {bar['figure']:.3f} | "
                   f"{'-' if info else bar['relation'] + ' ' + format(bar['bound'], 'g')} | "
                   f"{'info' if info else ('yes' if bar['holds'] else 'NO')} |")
    out += ["", "| case | memplane | HTTP floor | mp/HTTP floor | floor | mp/floor | spread |",
            "|---|--:|--:|--:|--:|--:|--:|"]
    for name, e in results.items():
        if name.startswith(("write/", "read/")) and "/http/" in name:
            spread = e.get("spread", {}).get("http", {}).get("spread")
            out.append(f"| {name} | {_rate(e['memplane'])} | {_rate(e.get('http_floor'))} | "
                       f"{_ratio(e, 'vs_http_floor')} | {_rate(e.get('floor'))} | "
                       f"{_ratio(e, 'vs_floor')} | "
                       f"{'-' if spread is None else format(spread, '.0%')} |")
    out += ["", "| case | sustained | without search | ratio | answered | without search "
            "| ratio | settle s |", "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for name, e in results.items():
        if name.startswith("sustained-write/"):
            tails = e["settle_seconds"]
            out.append(f"| {name} | {_rate(e['memplane'])} | {_rate(e['no_search'])} | "
                       f"{_ratio(e, 'vs_no_search')} | "
                       f"{_rate(e['memplane_settled_excluded'])} | "
                       f"{_rate(e['no_search_settled_excluded'])} | "
                       f"{_ratio(e, 'vs_no_search_settled_excluded')} | "
                       f"{tails['search']:.2f} / {tails['no_search']:.2f} |")
    out += ["", "| case | memplane | HTTP floor | peer | ÷ floor | ÷ peer | unit |",
            "|---|--:|--:|--:|--:|--:|---|"]
    for name, e in results.items():
        if name.startswith(("batch-", "langgraph-")):
            vs_peer = "vs_peer" if name.startswith("batch-") else "ratio"
            vs_floor = "vs_http_floor" if name.startswith("batch-") else "vs_floor"
            floor = e.get("http_floor") if name.startswith("batch-") else e.get("floor")
            out.append(f"| {name} | {_rate(e['memplane'])} | {_rate(floor)} | "
                       f"{_rate(e['peer'])} | {_ratio(e, vs_floor)} | {_ratio(e, vs_peer)} | "
                       f"{e['unit']} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    print(markdown(json.loads(Path(sys.argv[1]).read_text())), end="")
