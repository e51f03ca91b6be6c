"""A request that takes at least ``MEMPLANE_SLOW_REQUEST_SECONDS`` is logged as a warning, at
the default log level, with its request id; others stay in the access log at info. The
threshold is what is tested (0.000001 s makes every request slow, an hour none), not a clock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control_plane.app import create_app
from control_plane.observability.json_logs import RequestIdFilter
from tests.support.service import BOOTSTRAP_KEY, make_settings


def _access_records(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                    slow_seconds: float) -> list[logging.LogRecord]:
    app = create_app(make_settings("sqlite", tmp_path, run_background=False,
                                   slow_request_seconds=slow_seconds))
    caplog.set_level(logging.INFO, logger="memplane.access")
    caplog.handler.addFilter(RequestIdFilter())  # as the server's own handler does
    with TestClient(app) as client:
        caplog.clear()
        answer = client.get("/v1/memories/user/u-1/prefs", headers={
            "Authorization": f"Bearer {BOOTSTRAP_KEY}", "X-Request-ID": "req-slow-1"})
        assert answer.status_code == 404
    return [r for r in caplog.records if r.name == "memplane.access"]


def test_a_request_over_the_threshold_is_a_warning_with_its_route_and_request_id(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    [record] = _access_records(tmp_path, caplog, 0.000001)
    assert (record.levelno, record.getMessage()) == (logging.WARNING, "slow request")
    assert (record.method, record.route, record.status) == (  # type: ignore[attr-defined]
        "GET", "/v1/memories/{scope}/{scope_ref}/{key}", 404)
    assert record.duration_ms > 0  # type: ignore[attr-defined]
    assert record.request_id == "req-slow-1"  # type: ignore[attr-defined]
    assert "u-1" not in str(record.__dict__) and "prefs" not in str(record.__dict__)


def test_a_request_under_the_threshold_stays_at_info(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    [record] = _access_records(tmp_path, caplog, 3600)
    assert (record.levelno, record.getMessage()) == (logging.INFO, "request")
    assert record.route == "/v1/memories/{scope}/{scope_ref}/{key}"  # type: ignore[attr-defined]
