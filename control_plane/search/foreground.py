"""When requests last used the database, so that an indexer inside the server yields to
them: it waits while a request committed in the last ``MEMPLANE_INDEX_YIELD_MS``, unless
its work has waited ``MEMPLANE_INDEX_MAX_LAG_SECONDS`` (``indexer.Indexer``). In the server's
process, listeners on its engine (``ForegroundActivity``); in a background process beside
it, a clock the two share (``ServerActivity``)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

from sqlalchemy import Engine, event

_BACKGROUND_THREADS = ("memplane-", "job-lease-")


class ForegroundActivity:
    """When this process last used the database outside its background threads (the
    server's request threads; not the sealer, job worker, indexer or search I/O threads,
    which are all named ``memplane-...``): listeners on the engine's connection checkouts
    and commits, one clock read each. Checkouts catch the PostgreSQL hot path too, whose
    single statements run on raw connections (``db.direct``) that fire no commit event."""

    def __init__(self, engine: Engine,
                 clock: Callable[[], float] = time.monotonic, *,
                 shared: SharedClock | None = None) -> None:
        self.engine = engine
        self.clock = clock
        self.last = -math.inf
        self.shared = shared  # also told to the indexer of a background process
        self.ignored: set[int] = set()  # thread idents whose commits do not count
        event.listen(engine, "checkout", self._used)
        event.listen(engine, "commit", self._used)

    def ignore_this_thread(self) -> None:
        self.ignored.add(threading.get_ident())

    def _used(self, *_: object) -> None:
        thread = threading.current_thread()
        if thread.ident in self.ignored or thread.name.startswith(_BACKGROUND_THREADS):
            return
        self.last = self.clock()
        if self.shared is not None:
            self.shared.value = self.last

    def quiet_for(self) -> float:
        """Seconds since the foreground last used the database (infinite if never)."""
        return self.clock() - self.last

    def close(self) -> None:
        for name in ("checkout", "commit"):
            if event.contains(self.engine, name, self._used):
                event.remove(self.engine, name, self._used)


class SharedClock(Protocol):
    """A ``time.monotonic`` reading shared between processes (a ``multiprocessing``
    ``RawValue`` of a double): the system-wide monotonic clock, so comparable in both."""

    value: float


class ServerActivity:
    """``ForegroundActivity`` of the server this process runs beside (control_plane.
    background): when its requests last used the database, read from the clock it shares."""

    def __init__(self, shared: SharedClock,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.shared = shared
        self.clock = clock

    def ignore_this_thread(self) -> None:
        pass  # this process's own threads never publish

    def quiet_for(self) -> float:
        return self.clock() - self.shared.value

    def close(self) -> None:
        pass
