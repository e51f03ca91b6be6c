"""Small helpers for the storage-configuration tests: HTTP calls and a GCS emulator whose
buckets report a European location."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.support.emulator_fixtures import _started
from tests.support.emulators import FakeGcsServer
from tests.support.service import Tenant


class EuropeanGcsServer(FakeGcsServer):
    """fake-gcs-server reports one location for every bucket (``-location``, default
    US-CENTRAL1) whatever the create call asked; this one reports EUROPE-WEST1."""

    location = "EUROPE-WEST1"

    def command(self) -> Sequence[str]:
        return [*super().command(), "-location", self.location]


@pytest.fixture(scope="session")
def eu_gcs_server() -> Iterator[EuropeanGcsServer]:
    yield from _started(EuropeanGcsServer)


def create(tenant: Tenant, body: dict[str, Any], key: str | None = None,
           headers: dict[str, str] | None = None) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.post("/v1/storage/configs", json=body, headers=headers or {})


def call(tenant: Tenant, method: str, path: str, key: str | None = None, **kwargs: Any) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.request(method, path, **kwargs)
