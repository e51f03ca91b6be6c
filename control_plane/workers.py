"""``memplane serve --workers N``: N server processes share the port, and what must happen
once per host happens once.

The parent runs the migrations and makes the default tenant (``app.prepare``), then makes a
directory of its own (0700, in the temporary directory) holding the host's board
(control_plane.host_board: the caches' change counters and the requests' clock) and
prometheus-client's multiprocess files (``PROMETHEUS_MULTIPROC_DIR``). It starts one
background process (control_plane.background) that runs every background loop of the host —
audit sealer, job worker with the compactor's and retention's schedules, search indexer —
and then uvicorn's supervisor, whose N workers each build the app with ``worker_app``: they
serve requests only. Each worker dies with the parent (SIGKILL included), as the background
process does; uvicorn starts a worker that died again. On exit the workers stop, then the
background process, and the directory is removed (or, after a SIGKILL, by the next start:
``sweep_leftovers``).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from . import host_board
from .background import BackgroundProcess, die_with
from .observability.metrics import MULTIPROC_ENV

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .settings import Settings

PARENT_ENV = "MEMPLANE_SERVE_PARENT"
ARENAS_ENV = "MALLOC_ARENA_MAX"
ARENAS = 2
_M_ARENA_MAX = -8  # glibc's <malloc.h>


def limit_malloc_arenas(arenas: int = ARENAS) -> int | None:
    """Limit glibc's malloc to ``arenas`` arenas in this process (``mallopt``) and in those it
    starts (``MALLOC_ARENA_MAX``, which glibc reads when a process starts), unless the
    operator set ``MALLOC_ARENA_MAX``. Left alone, glibc gives threads arenas of their own, up
    to eight per core, and keeps what is freed in each: the server's RSS grew with its
    request threads' work long after its caches were full (docs/soak.md). Python's own
    allocator serves small objects either way, and the GIL leaves the arenas little to
    contend for. Call it before the process starts threads. Returns the limit in force, or
    None where the C library is not glibc or the operator's value is not a number."""
    chosen = os.environ.get(ARENAS_ENV)
    if chosen is not None:
        return int(chosen) if chosen.strip().isdigit() else None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(_M_ARENA_MAX, arenas) != 1:  # pragma: no cover - a C library without it
        return None
    os.environ[ARENAS_ENV] = str(arenas)
    return arenas


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


SQLITE_ONE = ("memplane: one server process on SQLite, whose writes take turns on one file "
              "(more processes only queue for it; docs/workers.md); --workers N runs N")


def default_workers(settings: Settings) -> tuple[int, str | None]:
    """``memplane serve`` without ``--workers``: one process per core on PostgreSQL; one on
    SQLite (the embedded default), with the sentence that says why."""
    from sqlalchemy.engine import make_url

    if make_url(settings.resolved_database_url).get_backend_name() == "sqlite":
        return 1, SQLITE_ONE
    return cores(), None


def serve(settings: Settings, host: str, port: int, workers: int) -> None:
    """Serve with ``workers`` processes until a signal stops the server."""
    import uvicorn

    from .app import prepare
    from .runtime import Runtime, start_host_background_work

    runtime = Runtime(settings)
    try:
        prepare(runtime)
    finally:
        runtime.close()
    sweep_leftovers()
    place = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
    try:
        board = host_board.Board.create(place / "board")
        metrics = place / "metrics"
        metrics.mkdir(mode=0o700)
        # Read by the processes started from here on (spawned: they import afresh).
        os.environ.update({host_board.ENV: str(board), MULTIPROC_ENV: str(metrics),
                           PARENT_ENV: str(os.getpid())})
        background = (BackgroundProcess(settings, host_board.HostClock(board),
                                        start_host_background_work)
                      if settings.run_background else None)
        try:
            uvicorn.run("control_plane.workers:worker_app", factory=True, host=host,
                        port=port, workers=workers, access_log=False, log_config=None,
                        timeout_keep_alive=settings.keep_alive_seconds)
        finally:
            if background is not None:
                background.close()
    finally:
        shutil.rmtree(place, ignore_errors=True)


_PREFIX = "memplane-serve-"


def sweep_leftovers(where: Path | None = None) -> list[Path]:
    """Remove the directories of servers that were killed before they could (a SIGKILL, an
    OOM kill): ``memplane-serve-<pid>-*`` in the temporary directory whose process is gone.
    Returns what was removed."""
    removed = []
    for place in Path(where or tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = place.name[len(_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not place.is_dir() or _alive(int(pid)):
            continue
        shutil.rmtree(place, ignore_errors=True)
        removed.append(place)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def worker_app() -> FastAPI:
    """One worker's app (uvicorn imports this by name in each worker process)."""
    from .app import create_app
    from .observability.json_logs import configure_logging
    from .settings import Settings

    parent = os.environ.get(PARENT_ENV)
    if parent:
        die_with(int(parent))
    settings = Settings()
    configure_logging(settings.log_level)
    return create_app(settings, host_worker=True)
