"""Pytest fixtures for the storage emulators (register with ``pytest_plugins``).

Session fixtures start each emulator once, on first use, and stop it at the end of the run.
Function fixtures hand each test a fresh bucket or container as the adapter's config dict.

An emulator that cannot start skips the tests that need it, with the reason — except when
``CI=true``, where a missing backend fails them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import pytest

from .emulators import (
    Azurite,
    Emulator,
    FakeGcsServer,
    MotoServer,
    new_azure_container,
    new_gcs_bucket,
    new_s3_bucket,
)

E = TypeVar("E", bound=Emulator)


def backend_unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"storage emulator unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _started(factory: Callable[[], E]) -> Iterator[E]:
    emulator = factory()
    try:
        emulator.start()
    except Exception as exc:  # any failure to start means the backend is unavailable
        emulator.stop()
        backend_unavailable(f"{emulator.name} did not start: {exc}")
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    yield from _started(MotoServer)


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[FakeGcsServer]:
    yield from _started(FakeGcsServer)


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[Azurite]:
    yield from _started(Azurite)


@pytest.fixture
def s3_config(moto_server: MotoServer) -> dict[str, Any]:
    return new_s3_bucket(moto_server)


@pytest.fixture
def versioned_s3_config(moto_server: MotoServer) -> dict[str, Any]:
    return new_s3_bucket(moto_server, versioned=True)


@pytest.fixture
def gcs_config(gcs_server: FakeGcsServer) -> dict[str, Any]:
    return new_gcs_bucket(gcs_server)


@pytest.fixture
def azure_config(azurite_server: Azurite) -> dict[str, Any]:
    return new_azure_container(azurite_server)


@pytest.fixture(scope="session")
def moto_auth_server() -> Iterator[MotoServer]:
    """A second moto that rejects unknown access keys, for bad-credential tests."""
    yield from _started(lambda: MotoServer(check_credentials=True))
