"""A new PostgreSQL deployment's hot tables are analyzed as soon as they first hold rows
(control_plane/db/statistics.py, run from the audit sealer's loop), not a minute and 2,000
changes later when autovacuum would."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.db.statistics import CHECK_SECONDS, FirstAnalyze
from control_plane.tenants.service import create_tenant


def _analyzed(engine: object) -> dict[str, bool]:
    with engine.connect() as conn:  # type: ignore[attr-defined]
        return {name: analyzed for name, analyzed in conn.execute(text(
            "SELECT relname, last_analyze IS NOT NULL FROM pg_stat_user_tables "
            "WHERE relname IN ('memory_pointers', 'subject_keys', 'memory_events', "
            "'access_logs')")).all()}


@pytest.mark.databases("postgres")
def test_hot_tables_are_analyzed_once_they_first_hold_rows(
        database: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    engine = make_engine(request.getfixturevalue("postgres").create_database())
    try:
        upgrade(engine)
        first = FirstAnalyze()
        assert first.check(engine, now=1_000.0) == []  # all empty: nothing to analyze yet
        assert not first.done
        with Session(engine) as session:
            create_tenant(session, "first-rows")  # its audit row: access_logs has a row
            session.commit()
        engine.dispose()  # the backend's statistics are flushed as it exits
        assert first.check(engine, now=1_000.0 + CHECK_SECONDS / 2) == []  # not due yet
        analyzed: list[str] = []
        now = 1_000.0
        deadline = time.monotonic() + 30
        while "access_logs" not in analyzed and time.monotonic() < deadline:
            now += CHECK_SECONDS
            analyzed += first.check(engine, now=now)
            time.sleep(0.2)
        assert "access_logs" in analyzed
        assert "memory_pointers" not in analyzed  # still empty: left to its first rows
        assert _analyzed(engine)["access_logs"] is True
        assert _analyzed(engine)["memory_pointers"] is False
        assert not first.done  # three tables still wait for their first rows
    finally:
        engine.dispose()


def test_sqlite_needs_no_first_analyze(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        first = FirstAnalyze()
        assert first.check(engine) == []
        assert first.done  # never asks again
    finally:
        engine.dispose()
