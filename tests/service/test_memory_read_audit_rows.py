"""What a read by key leaves behind, through the services: its success row goes through the
read group commit (the runtime's ``AuditBatcher``) and nowhere else, once; what it answers
cannot be changed afterwards."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.memories import read
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

ADDRESS = MemoryAddress.parse(Scope.user, "u-rows", "k")


@pytest.mark.databases("sqlite")  # PostgreSQL's own statement: tests/service/test_hotpath.py
def test_a_reads_row_goes_through_the_read_group_commit_once(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor, ADDRESS,
                                     {"a": 1}, MemoryMeta())
    assert isinstance(pointer, MemoryPointer)
    batcher = world.runtime.plane.audit_batcher
    assert batcher is not None
    passed: list[tuple[str, Any]] = []
    original = batcher.record

    def record(*args: Any, **kwargs: Any) -> None:
        passed.append((args[3], kwargs.get("pointer_id")))
        original(*args, **kwargs)

    monkeypatch.setattr(batcher, "record", record)
    assert world.read(ADDRESS) == {"a": 1}
    assert passed == [("read", pointer.id)]
    with world.runtime.sessions() as session:
        rows = session.execute(select(AccessLog.pointer_id, AccessLog.success).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "read")).all()
    assert [tuple(r) for r in rows] == [(pointer.id, True)]


def test_a_reads_answer_and_a_listings_page_are_frozen(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, ADDRESS, 1, MemoryMeta())
        value = memories.get_value(session, world.runtime.plane, world.actor, ADDRESS)
        page = read.page_of_pointers(
            session, world.actor, scope="user", scope_ref="u-rows", user_id=None,
            memory_type=None, sync_status=None, cursor=None, limit=10, access=read.EVERYTHING,
            tag=None, key_prefix=None, batcher=None, order="created")
    assert (value.value, [p.key for p in page.pointers]) == (1, ["k"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.value = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        page.next_cursor = "x"  # type: ignore[misc]
