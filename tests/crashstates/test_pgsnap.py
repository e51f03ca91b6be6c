"""The PostgreSQL side of the crash-state recording (pgsnap.py): a poll after a commit answers
a copy of the database as of that commit, whichever transaction completed, and the copy
written back is exactly that database."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.postgres import ExternalPostgres, PostgresCluster

from . import pgsnap

pytestmark = pytest.mark.postgres


def _rows(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(pgsnap.plain(url)) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT id, v FROM t ORDER BY id")]


def test_each_commit_is_copied_at_the_next_poll_and_written_back_as_it_was(
        postgres: PostgresCluster | ExternalPostgres) -> None:
    url = postgres.create_database()
    with psycopg.connect(pgsnap.plain(url), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v text NOT NULL)")
        conn.execute("CREATE TABLE u (k text)")
    watcher = pgsnap.PostgresCommits(url)
    older = psycopg.connect(pgsnap.plain(url))
    younger = psycopg.connect(pgsnap.plain(url), autocommit=True)
    try:
        empty = watcher.poll()
        assert empty is not None and empty.tables == ()
        assert empty.sequences == (("t_id_seq", None),)
        assert watcher.poll() is None  # nothing committed since

        # The older transaction takes its id first and commits last: the newest completed
        # transaction id does not move at its commit, the list of those running does.
        older.execute("INSERT INTO t (v) VALUES ('older')")
        younger.execute("INSERT INTO t (v) VALUES ('younger')")
        first = watcher.poll()
        older.commit()
        second = watcher.poll()
        assert first is not None and second is not None

        # A commit that leaves the tables as they were adds no copy.
        with younger.transaction():
            younger.execute("INSERT INTO u VALUES ('gone')")
            younger.execute("DELETE FROM u")
        assert watcher.poll() is None
    finally:
        older.close()
        younger.close()
        watcher.close()

    pgsnap.restore(first, url)
    assert _rows(url) == [(2, "younger")]
    pgsnap.restore(empty, url)
    assert _rows(url) == []
    pgsnap.restore(second, url)
    assert _rows(url) == [(1, "older"), (2, "younger")]
    with psycopg.connect(pgsnap.plain(url), autocommit=True) as conn:
        conn.execute("INSERT INTO t (v) VALUES ('after')")  # the sequence was set back too
    assert _rows(url)[-1] == (3, "after")
    pgsnap.drop(url)
