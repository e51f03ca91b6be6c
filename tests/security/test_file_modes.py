"""Issue 10, point 7: the embedded default's SQLite database holds every tenant's metadata;
it is created 0600 (its -wal and -shm files too) in a data directory created 0700."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from control_plane.runtime import Runtime
from tests.support.service import make_settings


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sqlite_file_is_0600_and_the_data_dir_0700(tmp_path: Path) -> None:
    previous = os.umask(0o022)  # a usual umask: without care, files 0644 and dirs 0755
    try:
        data_dir = tmp_path / "home" / ".memplane"
        runtime = Runtime(make_settings("sqlite", data_dir))
        try:
            runtime.migrate()
            database = data_dir / "memplane.db"
            assert _mode(data_dir) == 0o700
            assert _mode(data_dir.parent) == 0o700  # created for it as well
            assert _mode(database) == 0o600
            for suffix in ("-wal", "-shm"):
                sidecar = Path(f"{database}{suffix}")
                assert sidecar.exists(), suffix
                assert _mode(sidecar) == 0o600, suffix
        finally:
            runtime.close()
            runtime.engine.dispose()
    finally:
        os.umask(previous)


def test_an_existing_database_file_is_tightened(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    database = data_dir / "memplane.db"
    database.touch(mode=0o644)
    os.chmod(database, 0o644)
    runtime = Runtime(make_settings("sqlite", data_dir))
    try:
        assert _mode(database) == 0o600
        assert _mode(data_dir) == 0o755  # a directory the operator made is theirs to set
    finally:
        runtime.close()
        runtime.engine.dispose()
