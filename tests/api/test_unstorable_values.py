"""The last line of defence: a value PostgreSQL refuses (a NUL in text) that got past the
input checks is a 422 with a sentence, never a 500 — and the database's message, which may
quote the value, is not in the answer."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from sqlalchemy import text
from starlette.testclient import TestClient

from control_plane.app import _install_error_handlers
from tests.support.service import Tenant

pytestmark = pytest.mark.databases("postgres")


def test_a_value_the_database_refuses_is_a_422(tenant: Tenant) -> None:
    app = FastAPI()
    _install_error_handlers(app)

    @app.get("/store")
    def store(value: str) -> dict[str, str]:
        with tenant.stack.engine.connect() as connection:  # a real psycopg DataError
            connection.execute(text("SELECT CAST(:value AS text)"), {"value": value})
        return {"stored": value}

    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/store", params={"value": "fine"}).json() == {"stored": "fine"}
        refused = client.get("/store", params={"value": "se\x00cret"})
    assert (refused.status_code, refused.json()) == (422, {
        "error": "validation_error",
        "detail": "a value in the request cannot be stored (control characters such as NUL, "
                  "or a number out of range); fix the value and retry"})
