"""A read by key of a memory whose subject key was destroyed (an erasure under way), through
the services on SQLite and PostgreSQL: the lookup finds no live key, and the read answers the
integrity error that says the object cannot be decrypted, never a crash."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import MemoryPointer, SubjectKey
from control_plane.errors import HashMismatch
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

ADDRESS = MemoryAddress.parse(Scope.user, "u-erased", "k")


def test_a_memory_whose_subject_key_was_destroyed_is_refused_as_undecryptable(
        world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        pointer = memories.set_value(session, world.runtime.plane, world.actor, ADDRESS,
                                     {"a": 1}, MemoryMeta())
    assert isinstance(pointer, MemoryPointer)
    with world.runtime.sessions() as session:
        begin_write(session)
        session.execute(update(SubjectKey).where(SubjectKey.tenant_id == world.tenant_id)
                        .values(destroyed_at=utcnow(), wrapped_key=None))
        session.commit()
    with pytest.raises(HashMismatch) as caught:
        world.read(ADDRESS)
    assert (caught.value.extra["reason"], caught.value.extra["actual_sha256"]) == (
        "undecryptable", None)
    assert caught.value.detail.startswith("the stored object could not be decrypted (")
