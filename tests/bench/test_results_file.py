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
    results_file._RUN.clear()  # a run of its own
    results = {"case": {"memplane": 1.0, "explain": "p" * (TEXT_LIMIT * 3)}}
    latest, dated = results_file.write(results, argv=["--quick"], out=tmp_path / "results")
    assert latest.name == "latest.json"
    full, small = json.loads(latest.read_text()), json.loads(dated.read_text())
    assert full["case"] == results["case"]
    assert small["case"]["explain"].endswith(f"({TEXT_LIMIT * 2} characters trimmed)")
    assert small["run"]["argv"] == ["--quick"] and small["run"]["commit"] in dated.name
    again = results_file.write(results, argv=["--quick"], out=tmp_path / "results")
    assert again[1] == dated  # one run, one file, however many saves
    assert len(json.loads(dated.read_text())["run"]["load_averages"]) == 2


def test_a_second_run_of_the_same_commit_keeps_the_first_runs_file(tmp_path: Path) -> None:
    out = tmp_path / "results"
    files = []
    for figure in (1.0, 2.0, 3.0):
        results_file._RUN.clear()  # a new run
        for _ in range(2):  # each run saves more than once
            _, dated = results_file.write({"case": {"memplane": figure}}, argv=[], out=out)
        files.append(dated)
    first = files[0].name.removesuffix(".json")
    assert [f.name for f in files] == [f"{first}.json", f"{first}-run2.json",
                                       f"{first}-run3.json"]
    assert [json.loads(f.read_text())["case"]["memplane"] for f in files] == [1.0, 2.0, 3.0]


def test_the_markdown_tables_quote_the_figures_as_stored() -> None:
    results = {
        "write/sqlite+local/http/c1": {
            "memplane": 376.4, "http_floor": 468.0, "floor": 922.0,
            "vs_http_floor": {"median": 0.795}, "vs_floor": {"median": 0.4},
            "spread": {"http": {"spread": 0.05}}},
        "write/sqlite+local/inproc/c1": {"memplane": 704.0},  # not an HTTP row: left out
        "sustained-write/sqlite+local/http/c16": {
            "memplane": 76.0, "no_search": 152.0, "vs_no_search": {"median": 0.5},
            "memplane_settled_excluded": 112.0, "no_search_settled_excluded": 169.0,
            "vs_no_search_settled_excluded": {"median": 0.63},
            "settle_seconds": {"search": 3.41, "no_search": 0.62}},
        "batch-write/postgres+local/http/c16": {
            "memplane": 4876.0, "http_floor": 6350.0, "peer": 6644.0, "unit": "items/s",
            "vs_http_floor": {"median": 0.77}, "vs_peer": {"median": 0.73}},
        "bars": {"write/sqlite+local/http/c1": {"figure": 0.795, "relation": "≥", "bound": 0.8,
                                                "holds": False},
                 "x ÷ peer": {"figure": 2.5, "relation": "info", "bound": 0.0,
                              "holds": None}},
    }
    lines = results_file.markdown(results).splitlines()
    assert lines[2:4] == ["| write/sqlite+local/http/c1 | 0.795 | ≥ 0.8 | NO |",
                          "| x ÷ peer | 2.500 | - | info |"]
    assert "| write/sqlite+local/http/c1 | 376 | 468 | 0.795 | 922 | 0.400 | 5% |" in lines
    assert not any("inproc" in line for line in lines)
    assert ("| sustained-write/sqlite+local/http/c16 | 76 | 152 | 0.500 | 112 | 169 | 0.630 "
            "| 3.41 / 0.62 |") in lines
    assert ("| batch-write/postgres+local/http/c16 | 4,876 | 6,350 | 6,644 | 0.770 | 0.730 "
            "| items/s |") in lines
