"""The bars read from a run's results: each figure, its bound, whether it holds at the edge,
and bars whose case did not run left out."""

from __future__ import annotations

from typing import Any

from bench.bars import AT_LEAST, AT_MOST, BELOW, INFO, Bar, bars, table


def _http(ratio: float) -> dict[str, Any]:
    return {"memplane": 400.0, "http_floor": 500.0,
            "vs_http_floor": {"median": ratio, "min": ratio - 0.1, "max": ratio + 0.1}}


RESULTS: dict[str, dict[str, Any]] = {
    "write/sqlite+local/http/c1": _http(0.8),  # at the bound: holds
    "read/sqlite+local/http/c16": _http(0.799),
    "write/sqlite+local/inproc/c1": {"memplane": 1.0, "vs_floor": {"median": 0.1}},
    "write/postgres+s3/http/c16": _http(0.5),  # no bar on cloud buckets
    # the batch case's bar reads its median of per-round ratios, not its medians' ratio
    "batch-write/postgres+local/http/c16": {"memplane": 4000.0, "peer": 4000.0,
                                            "vs_peer": {"median": 0.8}},
    "batch-read/postgres+local/http/c16": {"memplane": 6000.0, "peer": 3000.0,
                                           "vs_peer": {"median": 2.0}},
    "batch-write/postgres+local/http/c1": {"memplane": 4000.0, "vs_peer": {"median": 2.0}},
    "sustained-write/postgres+local/http/c16": {"vs_no_search": {"median": 0.8}},
    "sustained-write/sqlite+local/http/c16": {"vs_no_search": {"median": 0.79}},
    "langgraph-checkpoint-step/postgres+local/http/c1": {
        "vs_floor": {"median": 0.8}, "p50_ratio": {"median": 2.5}, "ratio": {"median": 0.4}},
    "langgraph-store-batch-put/postgres+local/http/c16": {
        "vs_floor": {"median": 0.45}, "p50_ratio": {"median": 1.1}, "ratio": {"median": 0.7}},
    "langgraph-store-put/postgres+local/http/c1": {"vs_floor": {"median": 0.1}},  # no bar
    "export/200x1MiB/throughput": {"memplane": 150.0, "floor": 190.0,
                                   "vs_same_work": {"median": 0.799}},
    "export/200x1MiB/raw_reads": {"memplane": 150.0, "floor": 6000.0},  # information only
    "export/200x1MiB/peak_rss_growth": {"memplane": 20.5, "bar": 100},
    "export/s3/64x1MiB/throughput": {"memplane": 70.0, "floor": 260.0},
    "export/s3/64x1MiB/peak_rss_growth": {"memplane": 100.0, "bar": 100},  # not below
    "scale/get_latency_1M_vs_10k": {"ratio": {"median": 1.2}},
    "scale/list_scope_latency_1M_vs_10k": {"ratio": {"median": 1.51}},
    "audit-tree/sealer_cpu_per_row/postgres/batch5000": {"ratio": {"median": 1.2}},
    "audit-tree/sealer_cpu_per_row/sqlite/calls_of_50": {"ratio": {"median": 1.21}},
    "audit-tree/inclusion_proof_1M/postgres/http": {"memplane": 9.99},
}


def test_each_bar_reads_its_figure_and_holds_only_within_its_bound() -> None:
    assert [(b.name, b.figure, b.relation, b.bound, b.holds) for b in bars(RESULTS)] == [
        ("write/sqlite+local/http/c1", 0.8, AT_LEAST, 0.8, True),
        ("read/sqlite+local/http/c16", 0.799, AT_LEAST, 0.8, False),
        ("sustained-write/sqlite+local/http/c16", 0.79, AT_LEAST, 0.8, False),
        ("sustained-write/postgres+local/http/c16", 0.8, AT_LEAST, 0.8, True),
        ("batch-write/postgres+local/http/c16", 0.8, AT_LEAST, 1.0, False),
        ("batch-read/postgres+local/http/c16", 2.0, AT_LEAST, 1.0, True),
        ("langgraph-checkpoint-step/postgres+local/http/c1", 0.8, AT_LEAST, 0.8, True),
        ("langgraph-store-batch-put/postgres+local/http/c16", 0.45, AT_LEAST, 0.8, False),
        ("langgraph-checkpoint-step/postgres+local/http/c1 ÷ peer", 2.5, INFO, 0.0, None),
        ("langgraph-store-batch-put/postgres+local/http/c16 ÷ peer", 0.7, INFO, 0.0, None),
        ("export/200x1MiB/peak_rss_growth", 20.5, BELOW, 100.0, True),
        ("export/s3/64x1MiB/peak_rss_growth", 100.0, BELOW, 100.0, False),
        ("export/200x1MiB/throughput", 0.799, AT_LEAST, 0.8, False),
        ("scale/get_latency_1M_vs_10k", 1.2, AT_MOST, 1.2, True),
        ("scale/list_scope_latency_1M_vs_10k", 1.51, AT_MOST, 1.5, False),
        ("audit-tree/sealer_cpu_per_row/postgres/batch5000", 1.2, AT_MOST, 1.2, True),
        ("audit-tree/sealer_cpu_per_row/sqlite/calls_of_50", 1.21, AT_MOST, 1.2, False),
        ("audit-tree/inclusion_proof_1M/postgres/http", 9.99, BELOW, 10.0, True),
    ]


def test_a_run_of_some_cases_has_only_their_bars() -> None:
    found = bars({"scale/get_latency_1M_vs_10k": {"ratio": {"median": 0.9}}})
    assert [b.json() for b in found] == [{
        "name": "scale/get_latency_1M_vs_10k", "figure": 0.9, "relation": AT_MOST,
        "bound": 1.2, "holds": True,
        "what": "latency at a million pointers ÷ at 10,000 (median of per-round ratios)"}]
    assert bars({}) == []
    assert Bar("x", 1.0, BELOW, 1.0, "").holds is False


def test_the_table_shows_a_figure_just_under_its_bound_as_under_it() -> None:
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(table([Bar("write/x/http/c1", 0.795, AT_LEAST, 0.8, "ratio"),
                         Bar("export/y/peak_rss_growth", 62.4, BELOW, 100.0, "MiB"),
                         Bar("langgraph-x/c1 ÷ peer", 2.5, INFO, 0.0, "was a bar")]))
    rows = [line for line in console.export_text().splitlines() if "/" in line]
    assert [[cell.strip() for cell in line.split("│")[2:5]] for line in rows] == [
        ["0.795", "≥ 0.8", "NO"], ["62.4", "< 100", "yes"], ["2.500", "-", "info"]]
