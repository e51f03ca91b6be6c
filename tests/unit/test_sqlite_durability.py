"""SQLite's durability settings on a live engine (docs/durability.md): the embedded default
runs in WAL mode with ``synchronous=FULL`` (the log synced at each commit: an acknowledged
write survives a power loss), an operator may choose NORMAL and is warned what it costs, and
a database file created by the engine has its name synced into its directory."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from control_plane.db import engine as engine_module
from control_plane.db.engine import make_engine
from control_plane.settings import Settings

LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}


def _pragmas(url: str, **options: str) -> tuple[object, object]:
    engine = make_engine(url, **options)  # type: ignore[arg-type]
    try:
        with engine.connect() as connection:
            return (connection.exec_driver_sql("PRAGMA journal_mode").scalar(),
                    connection.exec_driver_sql("PRAGMA synchronous").scalar())
    finally:
        engine.dispose()


def test_the_embedded_default_is_wal_with_synchronous_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("MEMPLANE_SQLITE_SYNCHRONOUS", raising=False)
    chosen = Settings().sqlite_synchronous
    assert chosen == "FULL"
    with caplog.at_level(logging.WARNING, logger="control_plane.db.engine"):
        assert _pragmas(f"sqlite:///{tmp_path / 'a.db'}", sqlite_synchronous=chosen) == (
            "wal", LEVELS["FULL"])
        assert _pragmas(f"sqlite:///{tmp_path / 'b.db'}") == ("wal", LEVELS["FULL"])
    assert caplog.records == []


@pytest.mark.parametrize("level", ["NORMAL", "OFF"])
def test_a_setting_below_full_is_applied_and_warned_about(
        level: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="control_plane.db.engine"):
        assert _pragmas(f"sqlite:///{tmp_path / 'n.db'}", sqlite_synchronous=level) == (
            "wal", LEVELS[level])
    assert [r.getMessage() for r in caplog.records] == [
        f"SQLite runs with synchronous={level}: a power loss or an operating-system crash "
        "can lose the last acknowledged writes (FULL keeps them)"]


def test_extra_is_applied_without_a_warning(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="control_plane.db.engine"):
        assert _pragmas(f"sqlite:///{tmp_path / 'x.db'}", sqlite_synchronous="EXTRA") == (
            "wal", LEVELS["EXTRA"])
    assert caplog.records == []


def test_a_new_database_file_is_synced_into_its_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(engine_module.os, "fsync", spy)
    database = tmp_path / "data" / "memplane.db"
    engine_module._private_file(database)
    assert synced == [str(database.parent)]
    engine_module._private_file(database)  # an existing file: nothing new to sync
    assert synced == [str(database.parent)]
