from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from control_plane.addresses import MemoryAddress
from control_plane.keys import subject_keys
from control_plane.memories import hotpath
from control_plane.runtime import Runtime
from tests.support.service import isolated_database, make_settings


@pytest.fixture
def own_runtime(database: str, request: pytest.FixtureRequest,
                tmp_path: Path) -> Iterator[Runtime]:
    """A runtime on a database of this test's own: its statistics are of its rows only."""
    runtime = Runtime(make_settings(isolated_database(database, request), tmp_path))
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def at_step(monkeypatch: pytest.MonkeyPatch) -> dict[str, Callable[[], None]]:
    """A subject key's named step (``subject_keys.checkpoint``) -> what runs there, once
    (popped before it runs: the action may itself pass the same step)."""
    table: dict[str, Callable[[], None]] = {}

    def checkpoint(step: str) -> None:
        action = table.pop(step, None)
        if action is not None:
            action()

    monkeypatch.setattr(subject_keys, "checkpoint", checkpoint)
    return table


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[MemoryAddress]]:
    """The addresses ``lookup_for_write`` was called for (it still runs)."""
    seen: list[MemoryAddress] = []
    real = hotpath.lookup_for_write

    def counted(session: Any, tenant_id: uuid.UUID, address: MemoryAddress,
                meta_user: str | None) -> hotpath.WriteLookup:
        seen.append(address)
        return real(session, tenant_id, address, meta_user)

    monkeypatch.setattr(hotpath, "lookup_for_write", counted)
    yield seen
