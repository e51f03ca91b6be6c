"""Writing a data subject's memories quickly at the service level, and reading the bucket
directly (not through the service) to check what an erasure left."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import Job, MemoryPointer
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld


def write_subject(world: ServiceWorld, user_id: str, n: int) -> dict[str, object]:
    """``n`` memories of ``user_id`` spread over the user, conversation and agent scopes;
    returns {storage path: value}."""
    written: dict[str, object] = {}
    with world.runtime.sessions() as session:
        for i in range(n):
            value = {"who": user_id, "i": i, "note": f"{user_id} item {i}"}
            if i % 3 == 0:
                address = MemoryAddress.parse(Scope.user, user_id, f"k{i}")
                meta = MemoryMeta()
            elif i % 3 == 1:
                address = MemoryAddress.parse(Scope.conversation, f"c{i % 7}", f"{user_id}-{i}")
                meta = MemoryMeta(user_id=user_id)
            else:
                address = MemoryAddress.parse(Scope.agent, "agent-1", f"{user_id}-{i}")
                meta = MemoryMeta(user_id=user_id)
            pointer = memories.set_value(session, world.runtime.plane, world.actor, address,
                                         value, meta)
            assert isinstance(pointer, MemoryPointer)
            written[pointer.storage_path] = value
    return written


def bucket_paths(world: ServiceWorld) -> set[str]:
    """Every object of the tenant, listed straight from the bucket."""
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list_versions(target.path("memories") + "/")}


def job(world: ServiceWorld, job_id: uuid.UUID) -> Job:
    with world.runtime.sessions() as session:
        found = session.scalar(select(Job).where(Job.id == job_id))
        assert found is not None
        return found
