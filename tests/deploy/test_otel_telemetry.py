"""FastAPI's OpenTelemetry instrumentation runs only when MEMPLANE_OTEL_TELEMETRY asks for it:
off, a request never looks up the OpenTelemetry providers (a cost on every request)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace

from control_plane.app import create_app
from tests.support.service import make_settings


@pytest.mark.databases("sqlite")
@pytest.mark.parametrize(("enabled", "looked_up"), [(False, False), (True, True)])
def test_requests_use_opentelemetry_only_when_asked(
        database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool,
        looked_up: bool) -> None:
    calls: list[int] = []
    real = trace.get_tracer_provider

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(trace, "get_tracer_provider", counted)
    app = create_app(make_settings(database, tmp_path, run_background=False,
                                   otel_telemetry=enabled))
    with TestClient(app) as client:
        calls.clear()  # the start-up may look too
        answers = [client.get("/healthz").status_code for _ in range(3)]
    assert answers == [200, 200, 200]
    assert bool(calls) is looked_up
