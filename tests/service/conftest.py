from __future__ import annotations

from collections.abc import Callable

import pytest

from control_plane.keys import subject_keys


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
