"""The hot tables' first ANALYZE on a new PostgreSQL deployment, as soon as they hold rows.

Until a table is first analyzed the planner knows nothing of it, and a lookup by address
(tenant, scope, scope ref, key) may be planned as a scan of the tenant's rows instead of a
probe of the address's unique index. Autovacuum analyzes a table after 2,000 changes plus
1 % (migration 0019), and only at its next round (a minute apart by default): a new
deployment, or a bench that starts timing within that minute, runs on plans made for empty
tables until then. The audit sealer's loop therefore asks, every ``CHECK_SECONDS`` until
each hot table was analyzed once, which of them hold rows but were never analyzed (by anyone:
``pg_stat_user_tables``), and analyzes those. After that it costs nothing: the statistics
are autovacuum's to keep.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import Engine, text

log = logging.getLogger(__name__)

HOT_TABLES = ("memory_pointers", "subject_keys", "memory_events", "access_logs")
CHECK_SECONDS = 5.0

_NEVER_ANALYZED = text(
    "SELECT relname, n_live_tup + n_tup_ins > 0 AS has_rows FROM pg_stat_user_tables "
    "WHERE schemaname = current_schema() AND relname = ANY(:tables) "
    "AND last_analyze IS NULL AND last_autoanalyze IS NULL")


class FirstAnalyze:
    """Analyzes each hot table once it first holds rows (PostgreSQL; nothing on SQLite,
    whose planner needs no statistics for these lookups)."""

    def __init__(self) -> None:
        self.done = False
        self._checked = 0.0

    def check(self, engine: Engine, now: float | None = None) -> list[str]:
        """The tables analyzed by this call; ``done`` once none is left to analyze."""
        if self.done or engine.dialect.name != "postgresql":
            self.done = True
            return []
        now = time.monotonic() if now is None else now
        if now - self._checked < CHECK_SECONDS:
            return []
        self._checked = now
        with engine.connect() as conn:
            waiting = conn.execute(_NEVER_ANALYZED, {"tables": list(HOT_TABLES)}).all()
            conn.rollback()
            analyzed = []
            for name, has_rows in waiting:
                if has_rows and name in HOT_TABLES:  # a name from the catalogue, checked
                    conn.execute(text(f"ANALYZE {name}"))
                    conn.commit()
                    analyzed.append(name)
        if analyzed:
            log.info("analyzed %s: their first rows arrived", ", ".join(analyzed))
        self.done = not waiting or len(analyzed) == len(waiting)
        return analyzed
