"""What the processes of one ``memplane serve --workers N`` share on their host: a page of
memory (a file the parent makes, each process maps) holding a clock and a few counters.

Each process keeps caches of what the database says (valid API keys, DLP policies, active
storage configurations, agents' routes). A change made through one process must reach the
caches of every other: each change bumps its topic's counter after it commits, and each
cached entry carries the counter it was read under. An entry whose counter is not the
current one is not used, so every process of the host stops using what was cached before
the change as soon as the change is bumped — a revoked key is refused by every worker at
once (no wait for ``MEMPLANE_AUTH_CACHE_SECONDS``). Reading a counter is one load from the
shared page (~0.1 µs); a bump takes a file lock.

Other hosts (replicas) have pages of their own: they follow when their entries expire (each
cache's TTL, 5 s by default). Without ``MEMPLANE_HOST_BOARD`` (one process, the tests'
servers) the page is plain memory of the process and the same code runs.

The clock (``HostClock``) is when the workers' requests last used the database, for the
background process's indexer to yield to them (search.foreground).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - the server runs on Linux
    fcntl = None  # type: ignore[assignment]

ENV = "MEMPLANE_HOST_BOARD"
SIZE = 4096
# Slot 0 holds the clock (a double); each topic one unsigned 64-bit counter after it.
KEYS, DLP, STORAGE, AGENTS = 1, 2, 3, 4
TOPICS = {"keys": KEYS, "dlp": DLP, "storage": STORAGE, "agents": AGENTS}


class Board:
    """The shared page, mapped (``path``) or the process's own (None)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._fd: int | None = None
        self._buffer: mmap.mmap | bytearray
        if path is None:
            self._buffer = bytearray(SIZE)
        else:
            self._fd = os.open(path, os.O_RDWR)
            self._buffer = mmap.mmap(self._fd, SIZE)
        self._slots = memoryview(self._buffer).cast("Q")
        self.clock = ctypes.c_double.from_buffer(self._buffer)
        self._lock = threading.Lock()

    @staticmethod
    def create(path: Path) -> Path:
        """A new zeroed page at ``path`` (mode 0600), for the processes to map."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, bytes(SIZE))
        finally:
            os.close(fd)
        return path

    def generation(self, topic: int) -> int:
        """How often ``topic`` changed on this host so far."""
        return int(self._slots[topic])

    def bump(self, topic: int) -> None:
        """``topic`` changed (call after the change committed): every process's entries
        read before now are stale."""
        with self._lock:
            if self._fd is not None and fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                try:
                    self._slots[topic] += 1
                finally:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            else:
                self._slots[topic] += 1


_current: Board | None = None
_attach = threading.Lock()


def current() -> Board:
    """This process's board: the host's page named by ``MEMPLANE_HOST_BOARD``, else the
    process's own."""
    board = _current
    if board is not None:
        return board
    return _attached()


def _attached() -> Board:
    global _current
    with _attach:
        if _current is None:
            where = os.environ.get(ENV)
            _current = Board(Path(where) if where else None)
        return _current


def generation(topic: int) -> int:
    return current().generation(topic)


def bump(topic: int) -> None:
    current().bump(topic)


class HostClock:
    """The board's clock as a ``search.foreground.SharedClock``: a ``time.monotonic``
    reading (system-wide, so comparable across processes). It reaches a spawned process by
    the board's path and maps the page there."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._board: Board | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.path = Path(str(state["path"]))
        self._board = None

    def _cell(self) -> ctypes.c_double:
        if self._board is None:
            board = current()
            self._board = board if board.path == self.path else Board(self.path)
        return self._board.clock

    @property
    def value(self) -> float:
        return float(self._cell().value)

    @value.setter
    def value(self, now: float) -> None:
        self._cell().value = now
