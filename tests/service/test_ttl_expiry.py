"""A memory whose ``ttl_days`` ran out is never served: not read, not listed, not read back
into a list an append extends. The clock is injected (the service's ``utcnow``), no sleeps.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.errors import NotFound
from control_plane.memories import read, shared, write_fast, write_general
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

TICK = timedelta(microseconds=1)


class Clock:
    def __init__(self) -> None:
        self.now = utcnow().replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    for module in (write_fast, write_general, read, shared):  # every memory path that judges expiry
        monkeypatch.setattr(module, "utcnow", c)
    return c



def _listed(world: ServiceWorld) -> list[str]:
    with world.runtime.sessions() as session:
        rows, _ = memories.list_pointers(session, world.actor, scope=None, scope_ref=None,
                                         user_id=None, memory_type=None, sync_status=None,
                                         cursor=None, limit=100)
    return sorted(f"{r.scope_ref}/{r.key}" for r in rows)


def test_an_expired_memory_is_neither_read_nor_listed(world: ServiceWorld,
                                                      clock: Clock) -> None:
    brief = MemoryAddress.parse(Scope.user, "u1", "brief")
    kept = MemoryAddress.parse(Scope.user, "u1", "kept")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, brief, "short-lived",
                           MemoryMeta(ttl_days=1))
        memories.set_value(session, world.runtime.plane, world.actor, kept, "for good",
                           MemoryMeta())
    written = clock.now
    clock.now = written + timedelta(days=1) - TICK  # the last instant it lives
    assert world.read(brief) == "short-lived"
    assert _listed(world) == ["u1/brief", "u1/kept"]

    clock.now = written + timedelta(days=1)  # expires_at itself: expired
    with pytest.raises(NotFound) as refused:
        world.read(brief)
    assert refused.value.detail == "the memory at user/u1 key=brief has expired"
    assert _listed(world) == ["u1/kept"]
    assert world.read(kept) == "for good"


def test_an_append_after_expiry_starts_a_new_list_and_never_serves_the_old_items(
        world: ServiceWorld, clock: Clock) -> None:
    log = MemoryAddress.parse(Scope.conversation, "c1", "messages")
    with world.runtime.sessions() as session:
        for item in ("old 1", "old 2"):
            memories.append_value(session, world.runtime.plane, world.actor, log, item,
                                  MemoryMeta(ttl_days=2))
    assert world.read(log) == ["old 1", "old 2"]
    clock.now += timedelta(days=2)
    with pytest.raises(NotFound):
        world.read(log)
    with world.runtime.sessions() as session:
        pointer = memories.append_value(session, world.runtime.plane, world.actor, log,
                                        "new", MemoryMeta())
    assert not isinstance(pointer, memories.Replay)
    assert pointer.expires_at is None  # the old expiry went with the old items
    assert world.read(log) == ["new"]
    clock.now += timedelta(days=3650)
    assert world.read(log) == ["new"]


def test_a_value_set_after_expiry_is_a_new_memory_without_the_old_expiry(
        world: ServiceWorld, clock: Clock) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "status")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, "old",
                           MemoryMeta(ttl_days=1))
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.user, "u1", "other"), "still",
                           MemoryMeta(ttl_days=5))
    clock.now += timedelta(days=1)
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor, address,
                                     "new", MemoryMeta())
    assert not isinstance(pointer, memories.Replay)
    assert pointer.expires_at is None
    assert world.read(address) == "new"
    assert _listed(world) == ["u1/other", "u1/status"]
    # A live memory rewritten without ttl_days keeps its expiry, as before.
    with world.runtime.sessions() as session:
        kept = memories.set_value(session, world.runtime.plane, world.actor,
                                  MemoryAddress.parse(Scope.user, "u1", "other"), "again",
                                  MemoryMeta())
    assert not isinstance(kept, memories.Replay)
    assert kept.expires_at is not None
    assert kept.expires_at - (clock.now - timedelta(days=1)) == timedelta(days=5)
    clock.now += timedelta(days=365)
    assert world.read(address) == "new"
    assert _listed(world) == ["u1/status"]
