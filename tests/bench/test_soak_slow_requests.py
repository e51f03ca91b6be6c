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
    }
