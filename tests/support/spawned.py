"""Targets for processes a test spawns (the spawn start method imports them by name)."""

from __future__ import annotations

from multiprocessing.connection import Connection

from control_plane.search.foreground import SharedClock


def echo_clock(clock: SharedClock, asked: Connection, answer: Connection) -> None:
    """Each time ``asked`` receives something, send back what ``clock`` reads now."""
    while True:
        try:
            asked.recv()
        except EOFError:
            return
        answer.send(clock.value)
