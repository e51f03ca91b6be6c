"""What start-up builds is kept out of the garbage collector's full passes while the server
runs (``gc.freeze`` in the application's lifespan) and handed back when it stops; requests'
own objects are collected as ever, by young passes made less often while serving. The
freeze and the thresholds are the process's, so the server runs in a process of its own here
(another test's application may be serving in this one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.databases("sqlite")

_SERVE = """
import gc, json, sys, weakref
from pathlib import Path
from fastapi.testclient import TestClient
from control_plane.app import create_app
from tests.support.service import make_settings

class Cycle:
    def __init__(self):
        self.me = self

seen = {"before": gc.get_freeze_count(), "thresholds_before": gc.get_threshold()}
app = create_app(make_settings("sqlite", Path(sys.argv[1]), run_background=False))
with TestClient(app) as client:
    seen["serving"] = gc.get_freeze_count()
    seen["thresholds_serving"] = gc.get_threshold()
    seen["status"] = client.get("/healthz").status_code
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    gc.collect()
    seen["cycle_collected"] = gone() is None
    seen["still_serving"] = gc.get_freeze_count()
seen["after"] = gc.get_freeze_count()
seen["thresholds_after"] = gc.get_threshold()
print(json.dumps(seen))
"""


def test_start_up_objects_are_frozen_while_serving_and_cycles_still_collected(
        tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _SERVE, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parents[2], check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == 0
    assert seen["serving"] > 10_000  # the modules, routes and schemas the server was built from
    assert seen["status"] == 200
    assert seen["cycle_collected"] is True  # a cycle made while serving is collected
    # (objects frozen may still be freed when their last reference goes)
    assert seen["serving"] >= seen["still_serving"] > 10_000
    assert seen["after"] == 0
    # Young passes every 10,000 net allocations while serving, the process's own after.
    assert seen["thresholds_before"] == [700, 10, 10]
    assert seen["thresholds_serving"] == [10_000, 10, 10]
    assert seen["thresholds_after"] == [700, 10, 10]
