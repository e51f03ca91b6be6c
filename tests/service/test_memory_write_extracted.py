"""A memory the ``remember`` extractor wrote (source ``remember``) never stores a detected
value, whatever the tenant's DLP policy; a memory written as sent follows the policy (the
default flags it)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer
from control_plane.dlp.guard import SensitiveData
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.dlp.helpers import CARD
from tests.support.service import ServiceWorld

VALUE = f"pay with {CARD}"


def _pointers(world: ServiceWorld) -> list[tuple[str | None, list[str]]]:
    with world.runtime.sessions() as session:
        return [(p.key, p.tags) for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id))]


def test_an_extracted_memory_holding_a_card_number_is_refused_under_the_default_policy(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-extracted", "pay")
    meta = MemoryMeta().model_copy(update={"source": "remember"})
    with world.runtime.sessions() as session, pytest.raises(SensitiveData) as refused:
        memories.set_value(session, world.runtime.plane, world.actor, address, VALUE, meta)
    assert refused.value.detail == ("the value holds a payment card number; an extracted "
                                    "memory never stores one")
    assert refused.value.extra["kinds"] == ["card"]
    assert _pointers(world) == []


def test_the_same_value_sent_by_the_caller_is_stored_and_flagged(world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-extracted", "pay")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, VALUE,
                           MemoryMeta(source="chat"))
    assert world.read(address) == VALUE
    assert _pointers(world) == [("pay", ["sensitive:card"])]

