"""A data subject's own key (a user key) reading memories by key through the services, on
SQLite and PostgreSQL: in another scope it reads its subject's memories and no one else's,
also once the address was read before (on PostgreSQL a known address takes the one-statement
read, which must not skip the subject check)."""

from __future__ import annotations

import pytest

from control_plane.addresses import MemoryAddress, Scope
from control_plane.errors import NotFound
from control_plane.identity import Access
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from tests.support.service import ServiceWorld

ALICE = Access(user_id="alice")
TENANT = Access()  # the tenant's own key: everything


def _read(world: ServiceWorld, address: MemoryAddress, access: Access = TENANT) -> object:
    with world.runtime.sessions() as session:
        return memories.get_value(session, world.runtime.plane, world.actor, address,
                                  access=access).value


@pytest.mark.parametrize("read_before", [False, True])
def test_a_user_key_reads_its_subjects_memory_in_another_scope_and_no_one_elses(
        world: ServiceWorld, read_before: bool) -> None:
    hers = MemoryAddress.parse(Scope.agent, "a1", "hers")
    his = MemoryAddress.parse(Scope.agent, "a1", "his")
    own = MemoryAddress.parse(Scope.user, "alice", "own")
    for address, subject in ((hers, "alice"), (his, "bob"), (own, None)):
        with world.runtime.sessions() as session:
            memories.set_value(session, world.runtime.plane, world.actor, address,
                               {"of": subject}, MemoryMeta(user_id=subject))
    if read_before:  # the tenant's key reads each first: the addresses are known
        assert [_read(world, a) for a in (hers, his, own)] == [
            {"of": "alice"}, {"of": "bob"}, {"of": None}]
    assert _read(world, hers, ALICE) == {"of": "alice"}
    assert _read(world, own, ALICE) == {"of": None}
    with pytest.raises(NotFound) as caught:
        _read(world, his, ALICE)
    assert caught.value.detail == "no memory at agent/a1 key=his"
