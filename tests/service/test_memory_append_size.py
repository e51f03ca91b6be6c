"""An append at the object size limit (MEMPLANE_MAX_OBJECT_BYTES): the list's new size is
its stored size, plus a comma unless the list is empty, plus the item's; a list that grows to
exactly the limit is stored, one byte more is refused and leaves the list as it was."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer
from control_plane.errors import PayloadTooLarge
from control_plane.memories import service as memories
from control_plane.memories.api import serialise
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

META = MemoryMeta()
TOO_LARGE = ("the stored value would be {size} bytes, over this server's limit of {limit} "
             "bytes per memory (MEMPLANE_MAX_OBJECT_BYTES); keep the value smaller, or start a "
             "new key instead of appending to this one")


def _seeded(world: ServiceWorld, key: str, value: list[Any]) -> MemoryAddress:
    address = MemoryAddress.parse(Scope.user, "u-append-size", key)
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, value, META)
    return address


def _append(world: ServiceWorld, address: MemoryAddress, item: Any) -> int:
    with world.runtime.sessions() as session:
        pointer = memories.append_value(session, world.runtime.plane, world.actor, address,
                                        item, META)
        return int(pointer.version)  # type: ignore[union-attr]


@pytest.mark.parametrize(("stored", "grown"), [([], ["b"]), (["a"], ["a", "b"])],
                         ids=["empty", "one-item"])
def test_an_append_growing_the_list_to_exactly_the_limit_is_stored(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, stored: list[str],
        grown: list[str]) -> None:
    address = _seeded(world, f"at-limit-{len(stored)}", stored)
    monkeypatch.setattr(world.runtime.plane, "max_object_bytes", len(serialise(grown)))
    assert _append(world, address, "b") == 2
    assert world.read(address) == grown


@pytest.mark.parametrize(("stored", "grown"), [([], ["b"]), (["a"], ["a", "b"])],
                         ids=["empty", "one-item"])
def test_an_append_one_byte_over_the_limit_is_refused_and_keeps_the_list(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, stored: list[str],
        grown: list[str]) -> None:
    address = _seeded(world, f"over-limit-{len(stored)}", stored)
    size = len(serialise(grown))
    monkeypatch.setattr(world.runtime.plane, "max_object_bytes", size - 1)
    with pytest.raises(PayloadTooLarge) as refused:
        _append(world, address, "b")
    assert refused.value.detail == TOO_LARGE.format(size=size, limit=size - 1)
    assert world.read(address) == stored


@pytest.mark.parametrize(("stored", "grown"), [([], [2]), ([1], [1, 2])],
                         ids=["empty", "one-item"])
def test_an_append_over_the_limit_is_refused_before_the_list_is_read(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, stored: list[int],
        grown: list[int]) -> None:
    """The new size is known from the row: the refusal reads nothing from the bucket, so a
    list whose object has gone missing is refused as too large, not reported corrupt."""
    address = _seeded(world, f"unread-{len(stored)}", stored)
    with world.runtime.sessions() as session:
        pointer = session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id,
            MemoryPointer.key == address.key)).one()
        target = world.runtime.plane.by_id(session, pointer.storage_config_id)
        path = pointer.storage_path
    target.adapter.delete_many([path])
    size = len(serialise(grown))
    monkeypatch.setattr(world.runtime.plane, "max_object_bytes", size - 1)
    with pytest.raises(PayloadTooLarge) as refused:
        _append(world, address, 2)
    assert refused.value.detail == TOO_LARGE.format(size=size, limit=size - 1)
    with world.runtime.sessions() as session:
        assert session.scalars(select(MemoryPointer.sync_status).where(
            MemoryPointer.tenant_id == world.tenant_id,
            MemoryPointer.key == address.key)).all() == ["synced"]
