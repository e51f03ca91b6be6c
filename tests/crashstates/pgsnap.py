"""The control plane on PostgreSQL: a copy of its database at each commit, and a copy written
back for a replay.

A commit is seen the way the SQLite side sees one (recorder.py), by polling at each recorded
operation under the recorder's lock, not by a hook on the server's engine: a hook sees only
the commits of that engine, a poll sees every transaction that completed on the server. The
poll asks for ``pg_current_snapshot()`` (one round trip): a write transaction that completed
since the last poll either moved its ``xmax`` or left its list of transactions in progress,
so the text differs. Only then are the tables copied, in one ``REPEATABLE READ`` transaction
(one consistent view), with binary ``COPY ... TO STDOUT`` of each table that has a row; a
copy equal to the previous one (a transaction that changed nothing here) is dropped.

Why this is the database at the crash point: PostgreSQL with ``fsync=on`` and
``synchronous_commit=on`` answers a commit only after its WAL record is flushed, so a crash
keeps every commit that completed before it and none that had not. The copy is taken while
the recorder holds its lock, so it holds every commit that completed before its place in the
log, and a commit that needed a file operation first (a pointer after its object) came after
that operation was logged.

``CREATE DATABASE ... TEMPLATE`` would copy the database in one statement, but refuses while
any other session is connected to the template, and the server's pool is. pg_dump starts a
process per copy. The copy here is in memory, a few tables of a few rows each.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url


def plain(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as psycopg takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def clone(template: str) -> str:
    """A new database copied from ``template`` (a migrated one no session is connected to);
    its SQLAlchemy URL."""
    name = f"crash_{uuid.uuid4().hex[:12]}"
    parsed = make_url(template)
    admin = plain(parsed.set(database="postgres").render_as_string(hide_password=False))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(parsed.database or "")))
    return parsed.set(database=name).render_as_string(hide_password=False)


def drop(url: str) -> None:
    parsed = make_url(url)
    admin = plain(parsed.set(database="postgres").render_as_string(hide_password=False))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(parsed.database or "")))


def without_flush_waits(url: str) -> None:
    """After the recording: the replays' sessions on this database commit without waiting for
    the WAL flush (nothing crashes during a replay; the recording ran with the wait)."""
    with psycopg.connect(plain(url), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(
            sql.Identifier(make_url(url).database or "")))


@dataclass(frozen=True)
class Snapshot:
    """The database as of one commit: each table with a row (binary COPY) and each sequence's
    position (``None``: never used)."""

    tables: tuple[tuple[str, bytes], ...]
    sequences: tuple[tuple[str, int | None], ...]

    def digest(self) -> str:
        h = hashlib.sha256()
        for name, data in self.tables:
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        h.update(repr(self.sequences).encode())
        return h.hexdigest()


def _tables(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
        "ORDER BY tablename")]


class PostgresCommits:
    """Watches one database; ``poll()`` answers a new ``Snapshot`` after each commit."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(plain(url), autocommit=True)
        self.tables = _tables(self.conn)
        assert self.tables, "the database is not migrated"
        self.seen = ""
        self.last = ""
        self.copies = 0  # tables copied, for a report

    def poll(self) -> Snapshot | None:
        seen = self.conn.execute("SELECT pg_current_snapshot()::text").fetchone()
        if seen is None or seen[0] == self.seen:
            return None
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = self.conn.execute("SELECT pg_current_snapshot()::text").fetchone()
            assert row is not None
            self.seen = row[0]
            snapshot = self._copy()
        if snapshot.digest() == self.last:
            return None
        self.last = snapshot.digest()
        return snapshot

    def _copy(self) -> Snapshot:
        probe = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {} WHERE EXISTS (SELECT 1 FROM {})").format(
                sql.Literal(t), sql.Identifier(t)) for t in self.tables)
        filled = [r[0] for r in self.conn.execute(probe)]
        tables = []
        with self.conn.cursor() as cur:
            for table in filled:
                with cur.copy(sql.SQL("COPY {} TO STDOUT (FORMAT binary)").format(
                        sql.Identifier(table))) as copy:
                    tables.append((table, b"".join(bytes(chunk) for chunk in copy)))
        self.copies += len(tables)
        sequences = tuple((r[0], r[1]) for r in self.conn.execute(
            "SELECT sequencename, last_value FROM pg_sequences "
            "WHERE schemaname = current_schema() ORDER BY sequencename"))
        return Snapshot(tuple(tables), sequences)

    def close(self) -> None:
        self.conn.close()


def restore(snapshot: Snapshot, url: str) -> None:
    """Make the database at ``url`` (the same schema) hold exactly ``snapshot``: every table
    emptied, the copied rows written back as they were (triggers and foreign-key checks off
    for the session, as pg_restore does: the rows are a state the database held), each
    sequence set back. ``DELETE``, not ``TRUNCATE``: a few rows, and TRUNCATE makes new
    files for every table and index (0.6 s against 15 ms here). The restore's own commit
    need not wait for its flush (nothing crashes during a replay)."""
    with psycopg.connect(plain(url)) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET synchronous_commit = off")
        for table in _tables(conn):
            conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
        with conn.cursor() as cur:
            for table, data in snapshot.tables:
                with cur.copy(sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(
                        sql.Identifier(table))) as copy:
                    copy.write(data)
        for name, last in snapshot.sequences:
            if last is None:
                conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.Identifier(name)))
            else:
                conn.execute("SELECT setval(%s, %s, true)", (name, last))
