"""The soak reads the server's slow-request warnings back from its log, and names which of
the requests its clients gave up on the server finished late (bench/soak_probes.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from bench.soak_probes import ServerProbes


def _line(request_id: str, route: str, ms: float, status: int = 200) -> str:
    return json.dumps({"time": "2026-12-06T00:45:50+0000", "level": "warning",
                       "logger": "memplane.access", "message": "slow request",
                       "request_id": request_id, "method": "PUT", "route": route,
                       "status": status, "duration_ms": ms})


def test_slow_requests_are_counted_and_matched_to_the_ones_the_client_gave_up_on(
        tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    memory = "/v1/memories/{scope}/{scope_ref}/{key}"
    log.write_text("\n".join([
        "memplane serving on http://127.0.0.1:1  (database: external)",
        _line("soak-7", memory, 21034.5),
        '{"level": "warning", "message": "indexing failed", "request_id": null}',
        _line("soak-9", memory, 6001.0, 503),
        _line("soak-12", "/v1/events", 5200.0),
        json.dumps({"time": "t1", "message": "event loop late", "late_ms": 1200.0,
                    "process_cpu_ms": 1150.0, "loop_thread_cpu_ms": 1190.5}),
        json.dumps({"time": "t2", "message": "event loop late", "late_ms": 8600.0,
                    "process_cpu_ms": 12.0, "loop_thread_cpu_ms": 3.1}),
        '{"message": "slow request", "request_id": "soak-13", ',  # cut short: skipped
    ]) + "\n")
    probes = ServerProbes(cast(Any, SimpleNamespace(output=log)), cast(Any, None), "db",
                          cast(Any, None))
    assert probes.slow_requests(["soak-7", "soak-8"]) == {
        "count": 3, "max_ms": 21034.5,
        "routes": {f"PUT {memory}": 2, "PUT /v1/events": 1},
        "client_gave_up": 2,
        "finished_late": [{"request_id": "soak-7", "route": memory, "status": 200,
                           "duration_ms": 21034.5}],
        "loop_late": {"count": 2, "worst": {"time": "t2", "late_ms": 8600.0,
                                            "process_cpu_ms": 12.0,
                                            "loop_thread_cpu_ms": 3.1}},
    }


def test_what_postgresql_logged_of_slowness_is_summed_up_without_parameters(
        tmp_path: Path) -> None:
    log = tmp_path / "pg.log"
    log.write_text("\n".join([
        "2026-12-06 01:22:07.123 UTC [81] LOG:  duration: 5877.123 ms  statement: COMMIT",
        "2026-12-06 01:22:07.125 UTC [82] LOG:  duration: 1203.5 ms  execute <unnamed>: "
        "UPDATE memory_pointers SET version=$1 WHERE id = $2",
        "2026-12-06 01:22:07.125 UTC [82] DETAIL:  parameters: $1 = '7', $2 = 'secret-id'",
        "2026-12-06 01:22:08.000 UTC [83] LOG:  duration: 1100.0 ms  statement: COMMIT",
        "2026-12-06 01:22:09.000 UTC [84] LOG:  process 84 still waiting for ShareLock on "
        "transaction 456 after 1000.1 ms",
        "2026-12-06 01:25:00.000 UTC [70] LOG:  checkpoint complete: wrote 123 buffers "
        "(0.8%); 0 WAL file(s) added, 0 removed, 0 recycled; write=12.1 s, sync=4.5 s, "
        "total=16.7 s; sync files=40, longest=2.1 s, average=0.1 s",
        "2026-12-06 01:30:00.000 UTC [70] LOG:  checkpoint complete: wrote 3 buffers (0.0%); "
        "0 WAL file(s) added, 0 removed, 0 recycled; write=0.3 s, sync=0.2 s, total=0.6 s",
    ]) + "\n")
    probes = ServerProbes(cast(Any, None), cast(Any, SimpleNamespace(log_path=log)), "db",
                          cast(Any, None))
    summary = probes.database_log()
    assert summary == {
        "slow_statements": 3, "slowest_ms": 5877.123,
        "statements": {"COMMIT": 2, "UPDATE memory_pointers SET version=$1": 1},
        "lock_waits": 1, "checkpoints": 2,
        "checkpoint_sync_max_s": 4.5, "checkpoint_total_max_s": 16.7,
    }
    assert "secret-id" not in str(summary)
