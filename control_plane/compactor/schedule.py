"""The daily compaction's job key (``MEMPLANE_COMPACTOR_SCHEDULE``, parsed by
``control_plane.schedules``).

Each job worker ticks the schedule between jobs: once the day's fire time has passed, it
queues a ``compact`` job for every active tenant under the unique job key
``compact:<UTC date>`` (``jobs.dedupe_key``), so however many workers tick, each tenant gets
one run per UTC day. A worker that was down at the fire time queues the run when it starts
later that same day; a day missed entirely is not replayed — the next run compacts whatever
is due then, so nothing is lost, only later.
"""

from __future__ import annotations

from datetime import date


def run_key(day: date) -> str:
    """The unique job key of a tenant's scheduled run on ``day`` (UTC)."""
    return f"compact:{day.isoformat()}"
