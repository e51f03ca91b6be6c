"""examples/langgraph_preferences.py runs as a user would run it, in its own process, against
a live memplane server (SQLite and PostgreSQL): the agent remembers the preference across
threads, and after the user's erasure neither the store, the checkpointer nor the bucket
holds anything of the user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.service import Tenant

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "langgraph_preferences.py"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.slow
def test_the_example_remembers_across_threads_and_forgets_on_erasure(tenant: Tenant) -> None:
    done = _run({"MEMPLANE_URL": tenant.stack.base_url, "MEMPLANE_API_KEY": tenant.admin_key,
                 "MEMPLANE_BUCKET_DIR": str(tenant.bucket_dir)})

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "[FAILED]" not in out
    assert "[thread-1] agent saw preferences ['vegetarian food']" in out
    assert ("[thread-2] agent saw preferences ['vegetarian food']; answers: How about a "
            "mushroom risotto tonight?") in out
    assert "[ok] thread 2: the agent found the preference stored in thread 1" in out
    assert "erasure job completed" in out
    assert "[ok] no pointer of the user is left (SDK listing)" in out
    assert "[ok] the checkpointer has no state for the user's threads" in out
    assert "of the user's objects left" in out
    assert "[ok] the bucket holds none of the user's objects" in out
    assert "[thread-3] agent saw preferences []" in out
    assert out.rstrip().endswith("All checks passed.")
    # Nothing of the user remains in the tenant, not even thread 3 of the last step.
    assert tenant.objects() == []
    with tenant.client() as admin:
        assert admin.memory.list_pointers().items == []


def test_the_example_says_what_to_set_when_the_environment_lacks_it() -> None:
    done = _run({"MEMPLANE_URL": "", "MEMPLANE_API_KEY": ""})
    assert done.returncode == 2
    assert done.stderr.strip() == "set MEMPLANE_URL and MEMPLANE_API_KEY (a tenant admin key)"
