"""A run's results on disk: everything in latest.json, a small dated file named by the
commit for the docs to quote."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bench import results_file
from bench.results_file import LIST_LIMIT, TEXT_LIMIT, name_of, trimmed


def test_long_texts_and_lists_are_trimmed_and_say_so() -> None:
    plan = "x" * (TEXT_LIMIT + 5)
    got = trimmed({"a": {"plan": plan, "n": 1.5}, "l": list(range(LIST_LIMIT + 3)),
                   "short": ["y", 2]})
    assert got["a"] == {"plan": "x" * TEXT_LIMIT + " … (5 characters trimmed)", "n": 1.5}
    assert got["l"] == [*range(LIST_LIMIT), "… (3 items trimmed)"]
    assert got["short"] == ["y", 2]


def test_the_dated_file_is_named_by_day_and_commit(tmp_path: Path) -> None:
    assert name_of(datetime(2026, 12, 5, 23, 59, tzinfo=UTC), "abc123") == \
        "2026-12-05-abc123.json"
    results = {"case": {"memplane": 1.0, "explain": "p" * (TEXT_LIMIT * 3)}}
    latest, dated = results_file.write(results, argv=["--quick"], out=tmp_path / "results")
    assert latest.name == "latest.json"
    full, small = json.loads(latest.read_text()), json.loads(dated.read_text())
    assert full["case"] == results["case"]
    assert small["case"]["explain"].endswith(f"({TEXT_LIMIT * 2} characters trimmed)")
    assert small["run"]["argv"] == ["--quick"] and small["run"]["commit"] in dated.name
