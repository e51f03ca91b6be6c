"""What start-up builds is kept out of the garbage collector's full passes while the server
runs (``gc.freeze`` in the application's lifespan) and handed back when it stops; requests'
own objects are collected as ever."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control_plane.app import create_app
from tests.support.service import make_settings

pytestmark = pytest.mark.databases("sqlite")


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_start_up_objects_are_frozen_while_serving_and_cycles_still_collected(
        tmp_path: Path) -> None:
    app = create_app(make_settings("sqlite", tmp_path, run_background=False))
    assert gc.get_freeze_count() == 0
    with TestClient(app) as client:
        frozen = gc.get_freeze_count()
        assert frozen > 10_000  # the modules, routes and schemas the server was built from
        assert client.get("/healthz").status_code == 200
        garbage = _Cycle()
        gone = weakref.ref(garbage)
        del garbage
        gc.collect()
        assert gone() is None  # a cycle made while serving is collected
        # (objects frozen may still be freed when their last reference goes)
        assert frozen >= gc.get_freeze_count() > 10_000
    assert gc.get_freeze_count() == 0
