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


def name_of(when: datetime, commit: str) -> str:
    return f"{when:%Y-%m-%d}-{commit}.json"


def write(results: dict[str, Any], *, argv: list[str],
          out: Path | None = None) -> tuple[Path, Path]:
    """Write both files; their paths (latest, dated)."""
    out = out or Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    when = datetime.now(UTC)
    commit = _commit(Path(__file__).resolve().parent.parent)  # the checkout that ran
    run = {"date": when.isoformat(timespec="seconds"), "commit": commit, "argv": argv,
           "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}
    latest = out / "latest.json"
    latest.write_text(json.dumps({"run": run} | results, indent=2))
    dated = out / name_of(when, commit)
    dated.write_text(json.dumps({"run": run} | trimmed(results), indent=1) + "\n")
    return latest, dated
