"""``memplane serve --workers N`` removes the directories of servers killed before they
could (control_plane.workers.sweep_leftovers): only those whose process is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from control_plane.workers import sweep_leftovers


def test_only_the_directories_of_dead_servers_are_removed(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = tmp_path / f"memplane-serve-{int(ended.stdout)}-abc"
    live = tmp_path / f"memplane-serve-{os.getpid()}-def"
    other = tmp_path / "memplane-serve-notapid-ghi"
    for place in (dead, live, other):
        (place / "metrics").mkdir(parents=True)
        (place / "board").write_bytes(bytes(8))
    assert sweep_leftovers(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
