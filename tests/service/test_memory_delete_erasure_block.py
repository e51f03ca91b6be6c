"""A delete during a subject's erasure: which memories the erasure's write block covers.

The block names data subjects (users). A user-scoped memory is about the user of its scope
ref *and* the user its metadata names, so an erasure of either refuses its delete; a
conversation's ref is no subject, so an erasure of a user who happens to share that ref
does not block the conversation's memories.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import MemoryPointer
from control_plane.errors import SubjectErasureInProgress
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld


def _erasing(world: ServiceWorld, user_id: str) -> str:
    return str(world.erasing(user_id))


def _rows(world: ServiceWorld) -> list[tuple[str, str | None, str | None, str]]:
    with world.runtime.sessions() as session:
        return [(p.scope_ref, p.key, p.subject_user_id, p.sync_status) for p in session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == world.tenant_id))]


def test_a_user_memory_about_another_user_is_blocked_by_the_erasure_of_its_scope_user(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-ref", "k")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, 1,
                           MemoryMeta(user_id="u-meta"))
    job_id = _erasing(world, "u-ref")
    with world.runtime.sessions() as session, \
            pytest.raises(SubjectErasureInProgress) as caught:
        memories.delete_value(session, world.runtime.plane, world.actor, address)
    assert caught.value.status_code == 409
    assert caught.value.extra == {"job_id": job_id}
    assert _rows(world) == [("u-ref", "k", "u-meta", "synced")]
    assert world.read(address) == 1


def test_a_conversation_memory_is_not_blocked_by_a_user_erasure_sharing_its_ref(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.conversation, "shared-ref", "k")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, 1, MemoryMeta())
    _erasing(world, "shared-ref")
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor, address)
    assert _rows(world) == []
