"""The soak under faults (bench/soak.py), short: mixed work across tenants on a real server
through a bucket outage and a PostgreSQL restart; every bar of the long soak holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import Soak

pytestmark = pytest.mark.slow


def _log_tail(path: str, lines: int = 60) -> str:
    """The server log's warnings and errors (its last ``lines``), for a failed bar."""
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    flagged = [line[:600] for line in text
               if '"level": "error"' in line or '"level": "warning"' in line]
    return "\n".join(flagged[-lines:])


@pytest.mark.timeout(600)
def test_a_short_soak_through_a_bucket_outage_and_a_database_restart_meets_every_bar() -> None:
    soak = Soak(minutes=1.25, tenants=8, threads=4)
    figures = soak.run()

    failed = [name for name, passed in figures["bars"].items() if not passed]
    if failed:  # the evidence in full (an assertion's message would be cut short)
        pytest.fail(f"bars failed: {failed}\n{json.dumps(figures, indent=1, default=str)}\n"
                    f"server warnings and errors:\n{_log_tail(figures['server_log'])}",
                    pytrace=False)
    ops = figures["operations"]
    # the mix ran: every kind of work was done, and both outages were seen by the load
    assert all(ops.get(kind, 0) > 0 for kind in ("write", "overwrite", "read", "search",
                                                 "event", "export", "erase")), ops
    assert {w.split(":")[0] for w in figures["refused_in_windows"]} == {"bucket", "database"}
    assert figures["readback"]["checked"] > 50 and figures["readback"]["erased_checked"] > 0
    assert figures["outcomes"].get("error", 0) == 0
