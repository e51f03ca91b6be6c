"""SQLite writers take turns across processes through a lock file beside the database
(``db.engine.SqliteWriters``): a writer waits for another process's turn before its
``BEGIN IMMEDIATE`` — not inside SQLite's sleeping busy handler — and starts once it ends."""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from control_plane.db.engine import SqliteWriters, make_engine, sqlite_writers

_HOLD = ("import fcntl, os, sys\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\n"
         "sys.stdin.readline()\n")


def test_a_writer_waits_for_another_process_s_turn_outside_sqlite(tmp_path: Path) -> None:
    database = tmp_path / "memplane.db"
    engine = make_engine(f"sqlite:///{database}")
    writers = sqlite_writers(engine)
    assert writers is not None and writers.shared == tmp_path / "memplane.db.writers"
    other = subprocess.Popen([sys.executable, "-c", _HOLD, str(writers.shared)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    done = threading.Event()

    def write() -> None:
        with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn:
            with conn.begin():
                conn.execute(text("CREATE TABLE t (x INTEGER)"))
                conn.execute(text("INSERT INTO t VALUES (1)"))
        done.set()

    try:
        assert other.stdout is not None and other.stdout.readline() == "held\n"
        writer = threading.Thread(target=write)
        writer.start()
        waited = not done.wait(0.5)
        # Meanwhile SQLite's write lock is free: the writer waits before BEGIN IMMEDIATE.
        plain = sqlite3.connect(database, timeout=0, isolation_level=None)
        plain.execute("BEGIN IMMEDIATE")
        plain.execute("ROLLBACK")
        plain.close()
    finally:
        assert other.stdin is not None
        other.stdin.write("\n")
        other.stdin.close()
        other.wait(timeout=10)
        if other.stdout is not None:
            other.stdout.close()
    assert waited
    assert done.wait(10)
    writer.join()
    # Its turn ended with its transaction: another process may take it at once.
    fd = os.open(writers.shared, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT x FROM t")).scalar() == 1
    engine.dispose()



def test_a_lock_file_that_cannot_be_opened_leaves_other_processes_to_sqlite(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writers = SqliteWriters(1.0, tmp_path / "missing" / "memplane.db.writers")
    connection = object()
    with caplog.at_level(logging.WARNING, logger="control_plane.db.engine"):
        writers.begin(connection)
        try:
            assert writers.holder is connection  # the process's own turn still holds
            assert writers.shared is None  # said once, not on every write
        finally:
            writers.end(connection)
        writers.begin(connection)
        writers.end(connection)
    assert writers.holder is None and not writers.lock.locked()
    assert [r.getMessage() for r in caplog.records] == [
        "could not use the SQLite writers' lock file (No such file or directory); writers "
        "in other processes are left to SQLite's busy timeout"]
