"""Daily schedules in cron syntax, UTC (``MEMPLANE_COMPACTOR_SCHEDULE``,
``MEMPLANE_RETENTION_SCHEDULE``): parsed once, asked whether today's run is due.

A job worker ticks each schedule between jobs: once the day's fire time has passed, it queues
that day's runs (``jobs.daily.DailyRuns``). A worker that was down at the fire time queues
them when it starts later that same day; a day missed entirely is not replayed — the next
run does whatever is due then, so nothing is lost, only later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import croniter

OFF = "off"


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule; ``expression`` None when the scheduled run is off."""

    expression: str | None

    @property
    def enabled(self) -> bool:
        return self.expression is not None

    def due_today(self, now: datetime) -> datetime | None:
        """The latest fire time at or before ``now`` on now's UTC date; None if there is
        none yet today (or the schedule is off)."""
        if self.expression is None:
            return None
        now = now.astimezone(UTC)
        fired: datetime = croniter(self.expression, now + timedelta(microseconds=1)).get_prev(
            datetime)
        return fired if fired.date() == now.date() else None

    def next_after(self, now: datetime) -> datetime | None:
        if self.expression is None:
            return None
        fire: datetime = croniter(self.expression, now.astimezone(UTC)).get_next(datetime)
        return fire


def parse_schedule(text: str, setting: str = "MEMPLANE_COMPACTOR_SCHEDULE") -> Schedule:
    """``off``, or a five-field cron expression (minute hour day month weekday) or an alias
    such as ``@daily``, in UTC; anything else raises ValueError with a sentence."""
    expression = " ".join(text.split())
    if expression.lower() == OFF:
        return Schedule(None)
    fields = expression.split(" ")
    if not expression.startswith("@") and len(fields) != 5:
        raise ValueError(
            f"{setting} {text!r} is not a cron expression of five fields "
            "(minute hour day-of-month month day-of-week, UTC), e.g. '17 6 * * *', or 'off'")
    if not croniter.is_valid(expression):
        raise ValueError(
            f"{setting} {text!r} is not a valid cron expression (a field is "
            "out of range or malformed); e.g. '17 6 * * *' for 06:17 UTC daily, or 'off'")
    return Schedule(expression)
