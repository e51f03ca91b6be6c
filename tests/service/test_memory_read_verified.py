"""The verified read (``memories/read.py``) through the services, on SQLite and PostgreSQL: each
way a stored object can fail its pointer gives its own reason, sentence and failure row and
marks the pointer corrupt; an intact object clears ``corrupt`` again; a pointer replaced while
it is read is looked up again, and one that keeps changing is a retryable conflict after
exactly three fetches; ``read_pointer`` serves the verified bytes raw or parsed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.errors import Conflict, HashMismatch, NotFound
from control_plane.keys import subject_keys as keys
from control_plane.kit import sha256_hex
from control_plane.memories import read
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.memories.shared import keyring_of
from storage_adapters.envelope import sealed_size
from tests.support.service import ServiceWorld

ADDRESS = MemoryAddress.parse(Scope.user, "u-read", "k")


def _set(world: ServiceWorld, value: Any, address: MemoryAddress = ADDRESS) -> MemoryPointer:
    with world.runtime.sessions() as session:
        result = memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                    MemoryMeta())
    assert isinstance(result, MemoryPointer)
    return result


def _adapter(world: ServiceWorld, pointer: MemoryPointer) -> Any:
    with world.runtime.sessions() as session:
        return world.runtime.plane.by_id(session, pointer.storage_config_id).adapter


def _replace(world: ServiceWorld, pointer: MemoryPointer, blob: bytes) -> None:
    adapter = _adapter(world, pointer)
    adapter.delete_many([pointer.storage_path])
    adapter.put(pointer.storage_path, blob)


def _status(world: ServiceWorld, pointer: MemoryPointer) -> str:
    with world.runtime.sessions() as session:
        row = session.get(MemoryPointer, pointer.id)
        assert row is not None
        return row.sync_status


def _failures(world: ServiceWorld) -> list[str]:
    with world.runtime.sessions() as session:
        return [r.detail for r in session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.success.is_(False)))]


def _refused(world: ServiceWorld) -> HashMismatch:
    with world.runtime.sessions() as session, pytest.raises(HashMismatch) as caught:
        memories.get_value(session, world.runtime.plane, world.actor, ADDRESS)
    return caught.value


def _forged(world: ServiceWorld, pointer: MemoryPointer, other: bytes) -> bytes:
    """The product's own sealing of other content for the pointer's path, id and subject."""
    ring = keyring_of(world.runtime.plane)
    with world.runtime.sessions() as session:
        handle = keys.key_for_write(session, ring, world.tenant_id,
                                    keys.subject_of("user", "u-read", "u-read"))
        return keys.seal_object(ring, world.tenant_id, handle, pointer.storage_path,
                                pointer.id, other)


def _expect(error: HashMismatch, pointer: MemoryPointer, what: str, actual: str | None,
            reason: str) -> None:
    assert (error.status_code, error.code) == (409, "hash_mismatch")
    assert error.detail == (f"the stored object {what}; it was not served and the pointer is "
                            "marked corrupt")
    assert error.extra == {"pointer_id": str(pointer.id),
                           "expected_sha256": pointer.content_sha256,
                           "actual_sha256": actual, "reason": reason}


def test_an_object_of_other_content_is_refused_with_both_hashes(world: ServiceWorld) -> None:
    pointer = _set(world, {"balance": 100})
    other = b'{"balance":999}'
    _replace(world, pointer, _forged(world, pointer, other))
    _expect(_refused(world), pointer, "does not match its hash", sha256_hex(other), "mismatch")
    assert _status(world, pointer) == "corrupt"
    assert _failures(world) == [f"hash_mismatch: object does not match its hash; expected "
                                f"{pointer.content_sha256} actual {sha256_hex(other)}"]


def test_a_missing_object_is_refused_as_missing(world: ServiceWorld) -> None:
    pointer = _set(world, {"a": 1})
    _adapter(world, pointer).delete_many([pointer.storage_path])
    _expect(_refused(world), pointer, "is missing from the bucket", None, "missing")
    assert _status(world, pointer) == "corrupt"
    assert _failures(world) == [f"hash_mismatch: object is missing from the bucket; expected "
                                f"{pointer.content_sha256} actual None"]


def test_an_object_larger_than_its_pointer_allows_is_refused_unread(world: ServiceWorld) -> None:
    pointer = _set(world, {"a": 1})
    _replace(world, pointer, b"x" * (sealed_size(pointer.content_size) + 1))
    _expect(_refused(world), pointer, "is larger than its pointer allows", None, "mismatch")
    assert _status(world, pointer) == "corrupt"


def test_an_object_that_does_not_decrypt_is_refused_with_the_reason(world: ServiceWorld) -> None:
    pointer = _set(world, {"a": 1})
    blob = _adapter(world, pointer).get(pointer.storage_path)
    _replace(world, pointer, blob[:-1] + bytes([blob[-1] ^ 1]))
    error = _refused(world)
    assert error.detail.startswith("the stored object could not be decrypted (")
    assert error.detail.endswith("); it was not served and the pointer is marked corrupt")
    assert (error.extra["reason"], error.extra["actual_sha256"]) == ("undecryptable", None)
    assert _status(world, pointer) == "corrupt"


def test_an_intact_object_read_again_clears_corrupt(world: ServiceWorld) -> None:
    pointer = _set(world, {"a": 1})
    with world.runtime.sessions() as session:
        session.execute(update(MemoryPointer).where(MemoryPointer.id == pointer.id)
                        .values(sync_status="corrupt"))
        session.commit()
    assert world.read(ADDRESS) == {"a": 1}
    assert _status(world, pointer) == "synced"


def test_missing_and_in_flight_pointers_are_not_found(world: ServiceWorld) -> None:
    with pytest.raises(NotFound) as caught:
        world.read(ADDRESS)
    assert caught.value.detail == "no memory at user/u-read key=k"
    pointer = _set(world, {"a": 1})
    with world.runtime.sessions() as session:
        session.execute(update(MemoryPointer).where(MemoryPointer.id == pointer.id)
                        .values(sync_status="pending_write"))
        session.commit()
    with pytest.raises(NotFound) as caught:
        world.read(ADDRESS)
    assert caught.value.detail == "no memory at user/u-read key=k"


def test_read_pointer_serves_the_verified_bytes_raw_or_parsed(world: ServiceWorld) -> None:
    pointer = _set(world, {"b": [1, 2]})
    plane = world.runtime.plane
    with world.runtime.sessions() as session:
        raw = read.read_pointer(session, plane, world.actor, pointer, raw=True).value
        parsed = read.read_pointer(session, plane, world.actor, pointer).value
        locked = read.fetch_locked(session, plane, world.actor, pointer)
    assert isinstance(raw, bytes) and sha256_hex(raw) == pointer.content_sha256
    assert json.loads(raw) == parsed == locked == {"b": [1, 2]}


def test_fetch_locked_refuses_an_object_of_other_content(world: ServiceWorld) -> None:
    pointer = _set(world, {"balance": 100})
    other = b'{"balance":999}'
    _replace(world, pointer, _forged(world, pointer, other))
    with world.runtime.sessions() as session, pytest.raises(HashMismatch) as caught:
        read.fetch_locked(session, world.runtime.plane, world.actor, pointer)
    _expect(caught.value, pointer, "does not match its hash", sha256_hex(other), "mismatch")
    assert _status(world, pointer) == "corrupt"


def test_a_pointer_replaced_while_it_is_read_is_read_again(world: ServiceWorld) -> None:
    old = _set(world, {"v": 1})
    new = _set(world, {"v": 2})
    assert (new.id, new.version) == (old.id, old.version + 1)
    _adapter(world, old).delete_many([old.storage_path])  # the old object, gone meanwhile
    with world.runtime.sessions() as session:
        got = read.read_pointer(session, world.runtime.plane, world.actor, old)
    assert got.value == {"v": 2}
    assert _status(world, new) == "synced"
    assert _failures(world) == []


def test_a_pointer_that_keeps_changing_is_a_conflict_after_three_fetches(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    pointer = _set(world, {"v": 0})
    adapter = _adapter(world, pointer)
    original = adapter.get
    fetched: list[str] = []
    busy: list[str] = []

    def overwrite_then_get(path: str, *args: Any, **kwargs: Any) -> bytes:
        if not busy:  # another writer replaces the memory just before each fetch
            busy.append(path)
            fetched.append(path)
            _set(world, {"v": len(fetched)})
            adapter.delete_many([path])
            busy.clear()
        return original(path, *args, **kwargs)

    monkeypatch.setattr(adapter, "get", overwrite_then_get)
    with world.runtime.sessions() as session, pytest.raises(Conflict) as caught:
        read.read_pointer(session, world.runtime.plane, world.actor, pointer)
    assert type(caught.value) is Conflict
    assert caught.value.detail == "the memory kept changing while it was being read; retry"
    assert len(fetched) == 3
    assert _failures(world) == []
