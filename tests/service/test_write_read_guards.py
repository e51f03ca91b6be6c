"""Two guards no other test holds, each driven to the interleaving or the object that only it
stops, on SQLite and PostgreSQL, through the services:

- the general write path never adopts an object orphan GC has marked: GC (zero grace) runs
  between the write's put and its commit, so the object it put is deleted; the write must
  seal and put a fresh one, or its synced pointer would name nothing;
- a read under encryption refuses a valid ciphertext of other content sealed with the same
  subject key for the same path and pointer (AES-GCM accepts it: only the hash check sees it).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.errors import HashMismatch
from control_plane.idempotency import Idempotency
from control_plane.integrity import reconcile
from control_plane.keys import subject_keys as keys
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.memories.shared import keyring_of
from tests.support.service import ServiceWorld


def _set(world: ServiceWorld, address: MemoryAddress, value: Any,
         idem: Idempotency | None = None) -> MemoryPointer:
    with world.runtime.sessions() as session:
        result = memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                    MemoryMeta(), idem)
    assert isinstance(result, MemoryPointer)
    return result


def _memory_objects(world: ServiceWorld) -> set[str]:
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    return {info.path for info in target.adapter.list(target.path("memories") + "/")}


@pytest.mark.parametrize("existing", [False, True])
def test_the_general_path_never_adopts_an_object_gc_deleted_between_put_and_commit(
        world: ServiceWorld, existing: bool) -> None:
    address = MemoryAddress.parse(Scope.user, "u-gc", "k")
    if existing:
        _set(world, address, {"v": 0})
    before = _memory_objects(world)
    collected: list[tuple[str, int, int]] = []

    def gc_between_put_and_commit(step: str) -> None:
        if step == "write:general_after_put" and not collected:
            (in_flight,) = _memory_objects(world) - before  # put, named by no pointer yet
            with world.runtime.sessions() as session:
                report = reconcile.collect_orphans(session, world.runtime.plane,
                                                   grace_seconds=0, tenant_id=world.tenant_id)
            collected.append((in_flight, report.marked, report.orphans_deleted))
            assert in_flight not in _memory_objects(world)

    world.runtime.plane.checkpoint = gc_between_put_and_commit
    # An Idempotency-Key sends the set down the general path (the fast path takes none).
    written = _set(world, address, {"v": 1}, Idempotency.of("twin-1", "set", "u-gc/k"))
    world.runtime.plane.checkpoint = world.checkpoint

    [(in_flight, marked, deleted)] = collected
    assert (marked, deleted) == (1, 1)  # GC saw the put object unnamed and deleted it
    assert written.storage_path != in_flight  # sealed and put again, not adopted
    assert written.version == (2 if existing else 1)
    assert written.storage_path in _memory_objects(world)
    assert world.read(address) == {"v": 1}
    with world.runtime.sessions() as session:
        pointer = session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.key == "k")).one()
        assert (pointer.sync_status, pointer.storage_path) == ("synced", written.storage_path)


def test_a_valid_ciphertext_of_other_content_under_the_same_key_and_path_is_refused(
        world: ServiceWorld) -> None:
    address = MemoryAddress.parse(Scope.user, "u-swap", "k")
    pointer = _set(world, address, {"balance": 100})
    other = b'{"balance":999}'
    assert len(other) == pointer.content_size
    ring = keyring_of(world.runtime.plane)
    assert ring.enabled  # the service's default: objects are sealed per subject
    with world.runtime.sessions() as session:
        target = world.runtime.plane.by_id(session, pointer.storage_config_id)
        handle = keys.key_for_write(session, ring, world.tenant_id,
                                    keys.subject_of("user", "u-swap", "u-swap"))
        # The product's own sealing, for the very path and pointer the row names, of other
        # content of the same size (so only the hash tells them apart).
        forged = keys.seal_object(ring, world.tenant_id, handle, pointer.storage_path,
                                  pointer.id, other)
        assert keys.open_object(session, ring, world.tenant_id, pointer.storage_path,
                                pointer.id, forged) == other
    target.adapter.delete_many([pointer.storage_path])
    target.adapter.put(pointer.storage_path, forged)

    with world.runtime.sessions() as session, pytest.raises(HashMismatch) as caught:
        memories.get_value(session, world.runtime.plane, world.actor, address)
    assert (caught.value.status_code, caught.value.code) == (409, "hash_mismatch")
    assert caught.value.detail == ("the stored object does not match its hash; it was not "
                                   "served and the pointer is marked corrupt")
    with world.runtime.sessions() as session:
        row = session.get(MemoryPointer, pointer.id)
        assert row is not None and row.sync_status == "corrupt"
        failed = [r.detail for r in session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.success.is_(False)))]
    assert any(d.startswith("hash_mismatch: object does not match its hash") for d in failed)
    assert not any("999" in d for d in failed)
