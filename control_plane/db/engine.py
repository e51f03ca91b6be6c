"""Engines and sessions for SQLite (the embedded default) and PostgreSQL.

The SQLite file holds tenants' metadata: it is created 0600 in a data directory created
0700 (an existing directory is left as its owner set it; an existing database file is
tightened to 0600), and SQLite gives its -wal and -shm files the database file's mode.
``secure_delete`` zeroes what a delete frees, and :func:`scrub_freed` checkpoints and
truncates the write-ahead log, so that after an erasure no page of the file or its log still
holds the erased rows.

Durability (docs/durability.md): SQLite runs in WAL mode with ``synchronous=FULL`` unless
``MEMPLANE_SQLITE_SYNCHRONOUS`` says otherwise. FULL syncs the write-ahead log at every
commit, so a write is on the disk before it is acknowledged and survives a power loss or an
operating-system crash. NORMAL syncs only at checkpoints: a killed process loses nothing (the
log is in the operating system's cache), but a power loss can lose the last acknowledged
transactions, which memplane promises to keep; OFF syncs nothing. A setting below FULL is
logged as a warning when the engine is made.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.session import _SessionCloseState

from .prepared import keeping_prepared

if sys.platform != "win32":
    import fcntl
else:  # pragma: no cover - the server runs on Linux; the turn then stays per process
    fcntl = None

log = logging.getLogger(__name__)


def make_engine(url: str, *, pool_size: int = 20, sqlite_synchronous: str = "FULL",
                pool_recycle: int = 1800, pre_ping: bool = False) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, sqlite_synchronous, pool_size)
    if parsed.drivername == "postgresql":
        # The URL object, not str(): str() masks the password as *** in SQLAlchemy 2.
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername == "postgresql+psycopg":
        require_psycopg()
    # Plans stay PostgreSQL's choice: forcing generic plans saved ~0.7 ms per write but made
    # list-by-scope 5x slower at a million pointers (measured with bench/scale.py).
    # The pool hands out the connection returned last (LIFO): one request at a time keeps
    # reusing one server process, warm, with its statements prepared and their plans made.
    # Handed out in turn (FIFO), a burst's ten connections served the following requests
    # each a tenth of the time: a warm search took ~0.7 ms longer
    # (docs/performance/warm-search-postgresql.md).
    # Connections older than pool_recycle are replaced when next checked out, either way;
    # with pre_ping, one the server or a proxy closed meanwhile is replaced too.
    # The pool keeps pool_size connections; a peak opens up to half as many again, each closed
    # when it is returned to a full pool. A process serving more requests at once than it
    # keeps opens and closes connections all the time (a new server process each on
    # PostgreSQL, its plans and prepared statements made again): at 16 clients and a pool
    # of 10, 3-9 connections per 320 requests, 10-12 % of the throughput.
    engine = create_engine(
        parsed, pool_size=pool_size, max_overflow=peak_extra(pool_size), pool_pre_ping=pre_ping,
        pool_recycle=pool_recycle, pool_use_lifo=True,
    )
    if engine.dialect.driver == "psycopg":  # a read-only transaction keeps prepared statements
        dialect: Any = engine.dialect
        dialect.do_rollback = keeping_prepared(dialect.do_rollback)
    return engine


def peak_extra(pool_size: int) -> int:
    """Connections a pool of ``pool_size`` opens beyond them at a peak: half as many again,
    and at least one (a thread holding a connection may wait on another thread's)."""
    return max(1, pool_size // 2)


def require_psycopg() -> None:
    """PostgreSQL needs the [postgres] extra; say so instead of a bare ModuleNotFoundError."""
    from storage_adapters.registry import MissingExtra

    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(
            "a PostgreSQL database needs the psycopg driver, which is not installed; "
            "install it with: pip install 'memplane[postgres]'") from exc


BUSY_TIMEOUT_S = 30.0  # how long a SQLite writer waits for the write lock before failing
AUTOCOMMIT = "AUTOCOMMIT"
"""SQLite: a connection with the execution option ``sqlite_begin=AUTOCOMMIT`` sends no BEGIN,
so each statement is a transaction of its own, as SQLite runs a statement outside one (and the
commit or rollback SQLAlchemy then sends finds nothing open). For one self-contained statement:
no BEGIN/COMMIT around it."""


SQLITE_DURABLE = ("FULL", "EXTRA")
"""The ``synchronous`` settings under which an acknowledged commit survives a power loss."""


def _sqlite_engine(url: str, synchronous: str, pool_size: int) -> Engine:
    database = make_url(url).database
    if synchronous.upper() not in SQLITE_DURABLE:
        log.warning("SQLite runs with synchronous=%s: a power loss or an operating-system "
                    "crash can lose the last acknowledged writes (FULL keeps them)",
                    synchronous.upper())
    # A file named by its path (not in memory, not a "file:" URI): made private, and its
    # writers' lock file beside it.
    on_disk = (Path(database) if database and database != ":memory:"
               and not database.startswith("file:") else None)
    if on_disk is not None:
        _private_file(on_disk)
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
        pool_size=pool_size, max_overflow=peak_extra(pool_size), pool_use_lifo=True)  # as above

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # SQLAlchemy, not the driver, decides when transactions begin (see _on_begin).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()

    shared = None if on_disk is None else on_disk.with_name(on_disk.name + ".writers")
    writers = _WRITERS[engine] = SqliteWriters(BUSY_TIMEOUT_S, shared)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A write transaction takes the write lock up front: a deferred one that reads and
        # then writes can fail with "database is locked" instead of waiting its turn.
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        if mode == AUTOCOMMIT:
            return
        if mode != "IMMEDIATE":
            conn.exec_driver_sql(f"BEGIN {mode}")
            return
        raw = conn.connection.dbapi_connection
        writers.begin(raw)
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            writers.end(raw)
            raise

    dialect = engine.dialect
    for name in ("do_commit", "do_rollback", "do_close"):
        setattr(dialect, name, writers.ending(getattr(dialect, name)))
    return engine


class SqliteWriters:
    """The server's SQLite write transactions take turns here before ``BEGIN IMMEDIATE``.

    SQLite runs one write transaction at a time. A writer that finds the write lock taken
    sleeps in SQLite's busy handler, in steps that grow to 100 ms, and the lock is often free
    long before it looks again: at 16 concurrent writers one write in a hundred waited two
    seconds while half took under 40 ms, and a writer can lose every race until the busy
    timeout fails it. Queued on a lock, each starts as soon as the one before it ends:
    throughput is the same, a write's wait is about the queue ahead of it (p99 2 s → 0.45 s,
    p50 40 → 130 ms, docs/performance/http-overhead.md).

    With ``shared`` (a file beside the database), the turn is also taken across processes:
    after the process's own lock, an exclusive ``flock`` on that file, polled every
    ``_POLL`` seconds. So the server's background process (control_plane.background) and the
    server take turns the same way, and so do the command line's writers. Writers that do
    not queue here (a thread opening a second write transaction while it holds one, a writer
    that waited ``wait`` seconds, a process that cannot open the file) still meet SQLite's
    busy timeout.
    """

    _POLL = 0.0005

    def __init__(self, wait: float, shared: Path | None = None) -> None:
        self.lock = threading.Lock()
        self.wait = wait
        self.holder: Any = None  # the driver connection whose write transaction holds it
        self.thread: int | None = None
        self.shared = shared
        self._fd: int | None = None
        self._flocked = False

    def begin(self, connection: Any) -> None:
        if self.thread == threading.get_ident():
            return  # this thread holds it for another connection: SQLite decides
        deadline = time.monotonic() + self.wait
        if self.lock.acquire(timeout=self.wait):
            self.holder, self.thread = connection, threading.get_ident()
            if self.shared is not None and fcntl is not None:
                self._flocked = self._take_file(deadline)

    def _take_file(self, deadline: float) -> bool:
        """The other processes' turn: an exclusive ``flock`` before ``deadline`` (False:
        not taken, SQLite decides). Called holding ``lock``."""
        assert fcntl is not None and self.shared is not None
        try:
            if self._fd is None:
                self._fd = os.open(self.shared, os.O_RDWR | os.O_CREAT, 0o600)
                weakref.finalize(self, os.close, self._fd)
            while True:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(self._POLL)
        except OSError as exc:  # said once: this process's writers then meet SQLite's busy
            self.shared = None  # timeout, as they did before the file
            log.warning("could not use the SQLite writers' lock file (%s); writers in other "
                        "processes are left to SQLite's busy timeout", exc.strerror)
            return False

    def end(self, connection: Any) -> None:
        if self.holder is not None and self.holder is connection:
            if self._flocked:
                self._flocked = False
                assert fcntl is not None and self._fd is not None
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            self.holder = self.thread = None
            self.lock.release()

    def ending(self, method: Callable[[Any], None]) -> Callable[[Any], None]:
        """``method`` (the dialect's commit, rollback or close), then the turn ends if this
        connection held it."""
        def ended(connection: Any) -> None:
            try:
                method(connection)
            finally:  # the dialect is handed the pool's proxy or the driver's connection
                self.end(getattr(connection, "dbapi_connection", connection))
        return ended


_WRITERS: weakref.WeakKeyDictionary[Engine, SqliteWriters] = weakref.WeakKeyDictionary()


def sqlite_writers(engine: Engine) -> SqliteWriters | None:
    """The queue of a SQLite engine's write transactions (None for PostgreSQL)."""
    return _WRITERS.get(engine)


def _private_file(path: Path) -> None:
    """Create the database's directory 0700 and the file itself 0600 (before SQLite does,
    with the process umask), or tighten an existing file to 0600."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    for directory in missing:  # mkdir's mode is subject to the umask; set it exactly
        os.chmod(directory, 0o700)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    if created and sys.platform != "win32":  # the new name itself survives a power loss
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o600)


def scrub_freed(session: Session) -> None:
    """SQLite: checkpoint the write-ahead log into the database and truncate it, so the log's
    older page images (rows since deleted) are gone from the disk; ``secure_delete`` already
    zeroed them in the file. Commits any open transaction first. PostgreSQL: nothing (deleted
    tuples are not visible to any reader and are reclaimed by vacuum)."""
    if session.get_bind().dialect.name != "sqlite":
        return
    if session.in_transaction():
        session.commit()
    # On a connection of its own, outside any transaction (a checkpoint cannot run inside
    # one). A reader still on an old snapshot makes it answer busy: try again briefly.
    raw = session.get_bind().engine.raw_connection()
    try:
        # Each attempt waits at most 100 ms for readers (not the 30 s busy timeout every
        # connection has), so "briefly" is about 5 s, not 25 minutes behind a long reader.
        raw.cursor().execute("PRAGMA busy_timeout=100")
        for _ in range(50):
            cursor = raw.cursor()
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            row = cursor.fetchone()
            busy = row[0] if row else 0
            cursor.close()
            if not busy:
                return
            time.sleep(0.1)
        log.warning("the SQLite write-ahead log could not be truncated (readers kept it "
                    "busy); it is on the next checkpoint")
    finally:
        raw.cursor().execute("PRAGMA busy_timeout=30000")  # back to the pool as it came
        raw.close()


class ControlSession(Session):
    """The control plane's session. ``commit()`` with no transaction open returns at once:
    SQLAlchemy would begin a transaction only to commit it (no statement is sent, but its
    bookkeeping costs ~50 us, and a verified read ends a possible transaction twice). Nothing
    else differs: objects are not expired on commit anyway, no session event is used, and a
    change made to the session (an object added, changed or deleted) opens a transaction,
    or is committed as before if one day it does not."""

    def commit(self) -> None:
        if self.in_transaction() or self.new or self.dirty or self.deleted:
            super().commit()

    def close(self) -> None:
        """As ``Session.close``, but at once when there is nothing to close: no transaction,
        no object (the hot paths run their statements on the driver, ``db.direct``), where
        SQLAlchemy would still build an empty identity map and its session's events
        (~20 us per request)."""
        if (self._transaction is None and self._close_state is _RESETS
                and not self.identity_map and not self._new and not self._deleted):
            return
        super().close()


_RESETS = _SessionCloseState.CLOSE_IS_RESET  # close() leaves the session usable (the default)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, class_=ControlSession, expire_on_commit=False,
                        autoflush=False)


def begin_write(session: Session) -> None:
    """Open the session's next transaction as a write transaction.

    Call with no transaction open. On PostgreSQL this is a plain BEGIN; on SQLite it is
    BEGIN IMMEDIATE, so concurrent writers queue on the busy timeout rather than fail.
    """
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
