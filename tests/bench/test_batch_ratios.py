"""The batch case's figures: items per second of the median round, and each ratio the
median of per-round ratios of items per second (batches carry BATCH items each)."""

from __future__ import annotations

from bench import batch
from bench.harness import Measurement


def _rounds(per_second: list[float]) -> list[Measurement]:
    return [Measurement(int(rate * 10), 10.0, 0.0, 0.0) for rate in per_second]


def test_ratios_are_medians_of_per_round_ratios_of_items() -> None:
    runs = {
        "batch-write": _rounds([40.0, 50.0, 20.0]),  # batches/s: 4,000 5,000 2,000 items/s
        "floor-write": _rounds([80.0, 50.0, 40.0]),  # 8,000 5,000 4,000 items/s
        "single-write": _rounds([400.0, 500.0, 100.0]),
        "peer-write": _rounds([5000.0, 2500.0, 4000.0]),
    }
    found = batch.ratios(runs, "write")
    assert {key: s.median for key, s in found.items()} == {
        "vs_peer": 0.8,  # 0.8, 2.0, 0.5 (the ratio of medians would be 1.0)
        "vs_http_floor": 0.5,  # 0.5, 1.0, 0.5
        "floor_vs_peer": 1.6,  # 1.6, 2.0, 1.0
        "vs_single": 10.0,  # 10, 10, 20
    }
    assert batch.items_per_second(runs["batch-write"], "batch-write") == 4000.0
    assert batch.items_per_second(runs["peer-write"], "peer-write") == 4000.0


def test_reads_have_no_floor_ratio() -> None:
    runs = {"batch-read": _rounds([60.0]), "single-read": _rounds([300.0]),
            "peer-read": _rounds([3000.0])}
    assert {k: s.median for k, s in batch.ratios(runs, "read").items()} == {
        "vs_peer": 2.0, "vs_single": 20.0}


def test_each_case_goes_first_in_turn_writes_before_reads() -> None:
    writes, reads = ["bw", "fw", "sw", "pw"], ["br", "sr", "pr"]
    orders = [batch.in_round(writes, reads, r) for r in range(batch.ROUNDS)]
    assert orders[0] == ["bw", "fw", "sw", "pw", "br", "sr", "pr"]
    assert orders[1] == ["fw", "sw", "pw", "bw", "sr", "pr", "br"]
    assert [o[0] for o in orders] == ["bw", "fw", "sw", "pw", "bw"]
    assert [o[4] for o in orders] == ["br", "sr", "pr", "br", "sr"]
    assert set(batch.ITEMS) == {"batch-write", "floor-write", "single-write", "peer-write",
                                "batch-read", "single-read", "peer-read"}
