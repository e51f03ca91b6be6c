"""The server's background work in a process of its own: the audit sealer and the search
indexer of ``memplane serve``, when it runs jobs and embeds (the embedded default's shape).

One Python process runs one thread at a time. As threads of the server, the indexer and the
sealer take turns with the requests: under batched reads at 16 clients they held the
interpreter in 29 % and 14 % of the samples. In a second process they run on another core,
and the indexer still waits while the server's requests use the database (the server
publishes when they last did on a clock the two processes share), within the same lag bound.

The process is the server's: it is started and stopped with it, started again if it dies,
and dies with it — a SIGKILL of the server included (``PR_SET_PDEATHSIG``, and the end of the
pipe it watches). On SQLite the two processes' writers take turns through a lock file beside
the database (``db.engine.SqliteWriters``), not through SQLite's sleeping busy handler.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from .db.engine import sqlite_writers

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy import Engine

    from .search.foreground import SharedClock
    from .settings import Settings

    # Starts the background work in the child (the audit sealer and the search indexer,
    # yielding to the server's requests as the shared clock tells); returns what stops it.
    # A module-level function, so that it reaches the spawned process by name.
    Work = Callable[[Settings, SharedClock], Callable[[], None]]

log = logging.getLogger(__name__)

_CONTEXT = multiprocessing.get_context("spawn")  # never fork a process that runs threads
_PR_SET_PDEATHSIG = 1
_RESTART_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)
_STOP_TIMEOUT = 15.0


def wanted(settings: Settings, engine: Engine) -> bool:
    """A server that runs the indexer (jobs and embedding on), on PostgreSQL or on a SQLite
    file whose writers take turns across processes (``db.engine.SqliteWriters``); an API
    replica beside ``memplane worker`` processes keeps its sealer a thread (no process per
    pod)."""
    if not (settings.background_process and settings.run_jobs and settings.embed_on_write):
        return False
    if engine.dialect.name == "postgresql":
        return True
    writers = sqlite_writers(engine)
    return writers is not None and writers.shared is not None and sys.platform == "linux"


class BackgroundProcess:
    """Runs ``run_child`` (and so ``work``) in a spawned process and keeps it running until
    ``close``.

    Every start happens in the supervising thread, which outlives the child: Linux sends
    the parent-death signal when the thread that started the child ends."""

    def __init__(self, settings: Settings, activity: SharedClock, work: Work) -> None:
        self.settings = settings
        self.activity = activity
        self.work = work
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._supervise, daemon=True,
                                        name="memplane-background-supervisor")
        self._thread.start()

    def _supervise(self) -> None:
        failures = 0
        while not self._closing.is_set():
            stop_reader, stop_writer = _CONTEXT.Pipe(duplex=False)
            process = _CONTEXT.Process(
                target=run_child, name="memplane-background", daemon=True,
                args=(self.work, self.settings, self.activity, stop_reader, os.getpid()))
            try:
                process.start()
            except Exception:
                log.exception("could not start the background process; trying again")
                stop_writer.close()
                failures += 1
                self._closing.wait(restart_delay(failures))
                continue
            finally:
                stop_reader.close()  # the child holds its own end
            started = time.monotonic()
            while not self._closing.is_set() and process.is_alive():
                wait([process.sentinel], timeout=0.5)
            if self._closing.is_set():
                _stop(process, stop_writer)
                return
            stop_writer.close()
            process.join()
            failures = 0 if time.monotonic() - started > 60 else failures + 1
            delay = restart_delay(failures)
            log.error("the background process (audit sealer, search indexer) exited with %s; "
                      "starting it again in %.0f s", process.exitcode, delay)
            self._closing.wait(delay)

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=_STOP_TIMEOUT + 5)


def restart_delay(failures: int) -> float:
    """Seconds before the next start after ``failures`` starts in a row that failed or
    exited within a minute: 1, 2, 5, 10, then 30 (0 failures: a long run ended, 1 s)."""
    return _RESTART_DELAYS[min(max(failures - 1, 0), len(_RESTART_DELAYS) - 1)]


def _stop(process: BaseProcess, stop_writer: Connection) -> None:
    """Ask the child to stop (the end of its pipe), then make sure it did."""
    stop_writer.close()
    process.join(timeout=_STOP_TIMEOUT)
    if process.is_alive():
        log.error("the background process did not stop in %.0f s; killing it", _STOP_TIMEOUT)
        process.kill()
        process.join()


def shared_clock() -> SharedClock:
    """A double both processes see, for when the server's requests last used the database."""
    value: SharedClock = _CONTEXT.RawValue(ctypes.c_double, float("-inf"))
    return value


def run_child(work: Work, settings: Settings, activity: SharedClock, stop: Connection,
              parent: int) -> None:
    """The background process: ``work`` (the sealer and the indexer), until the server
    closes its end of ``stop`` or dies. Ctrl-C in a terminal reaches the whole process group:
    the server handles it and closes the pipe; a SIGTERM stops this process cleanly."""
    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    from .observability.json_logs import configure_logging

    configure_logging(settings.log_level)
    close = work(settings, activity)
    try:
        stop.poll(None)  # the server writes nothing: this returns at the pipe's end
    except (EOFError, OSError):
        pass
    finally:
        close()


def die_with(parent: int) -> None:
    """End this process when ``parent`` does (SIGKILL included), or now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the signal was set
        os._exit(0)
