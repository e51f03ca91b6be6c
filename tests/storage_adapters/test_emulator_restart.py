"""A stopped emulator makes its adapter report StorageUnavailable; restarted on the same port,
the same adapter works again (emulator state is in memory, so the bucket is recreated)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from storage_adapters.base import StorageUnavailable
from storage_adapters.registry import from_config
from tests.support.emulator_fixtures import backend_unavailable
from tests.support.emulators import (
    Azurite,
    Emulator,
    EmulatorError,
    FakeGcsServer,
    MotoServer,
    new_azure_container,
    new_gcs_bucket,
    new_s3_bucket,
)

BACKENDS: dict[str, tuple[str, Callable[[], Emulator], Callable[[Any], dict[str, Any]]]] = {
    "s3": ("s3", MotoServer, new_s3_bucket),
    "gcs": ("gcs", FakeGcsServer, new_gcs_bucket),
    "azure": ("azure", Azurite, new_azure_container),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_stop_and_restart_on_the_same_port(backend: str) -> None:
    storage_type, make_emulator, new_bucket = BACKENDS[backend]
    emulator = make_emulator()
    try:
        emulator.start()
    except EmulatorError as exc:
        backend_unavailable(str(exc))
    try:
        port = emulator.port
        config = new_bucket(emulator)
        adapter = from_config(storage_type, config)
        adapter.put("before/stop", b"1")

        emulator.stop()
        assert emulator.running is False
        with pytest.raises(StorageUnavailable):
            adapter.get("before/stop")

        emulator.start()
        assert emulator.port == port
        emulator.create_bucket(config.get("bucket") or config["container"])
        adapter.put("after/restart", b"2")
        assert adapter.get("after/restart") == b"2"
        adapter.close()
    finally:
        emulator.stop()

