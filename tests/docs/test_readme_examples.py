"""The README's Python examples run as written against a live server: a user who copies one
gets what the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.support.service import Tenant

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_readme_has_python_examples() -> None:
    assert len(_python_blocks()) >= 1


def test_every_python_example_runs_against_a_live_server(tenant: Tenant) -> None:
    env = dict(os.environ, MEMPLANE_URL=tenant.stack.base_url, MEMPLANE_API_KEY=tenant.admin_key)
    for block in _python_blocks():
        done = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"{block}\n---\n{done.stderr[-2000:]}"
    with tenant.client() as client:
        # The first example sets, appends, reads, deletes and clears user u_123: nothing is
        # left, and every step reaches the audit log (which lists rows once they are sealed;
        # a clear records a delete row per memory it removes).
        assert list(client.memory.iter_pointers(user_id="u_123")) == []
        wanted = ["write", "append", "read", "delete"]
        deadline = time.monotonic() + 60
        while True:
            operations = [row.operation for row in client.audit.list(limit=100).items]
            if all(op in operations for op in wanted) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert [op for op in wanted if op not in operations] == []
    # The delete, the clear's one remaining memory, and the events example's entry.
    assert operations.count("delete") == 3
