"""Helpers to read and write objects as the service does (sealed), for direct assertions."""

from __future__ import annotations

import uuid

from control_plane.db.models import MemoryPointer
from control_plane.keys import subject_keys as keys
from control_plane.plane.keyring import Keyring
from control_plane.runtime import Runtime


def keyring(runtime: Runtime) -> Keyring:
    assert runtime.plane.keys is not None
    return runtime.plane.keys


def plaintext_of(runtime: Runtime, pointer: MemoryPointer, blob: bytes | None = None) -> bytes:
    """The decrypted content of a pointer's object (raises DecryptionError if it fails)."""
    with runtime.sessions() as session:
        target = runtime.plane.by_id(session, pointer.storage_config_id)
        if blob is None:
            blob = target.adapter.get(pointer.storage_path)
        return keys.open_object(session, keyring(runtime), pointer.tenant_id,
                                pointer.storage_path, pointer.id, blob)


def open_stored(runtime: Runtime, tenant_id: uuid.UUID, path: str, pointer_id: uuid.UUID,
                blob: bytes) -> bytes:
    """Decrypt bytes read straight from the bucket, as a read of that pointer would."""
    with runtime.sessions() as session:
        return keys.open_object(session, keyring(runtime), tenant_id, path, pointer_id, blob)


def seal_for(runtime: Runtime, tenant_id: uuid.UUID, path: str, pointer_id: uuid.UUID,
             subject: tuple[str, str], plaintext: bytes) -> bytes:
    """Bytes sealed exactly as a write to ``path`` for ``pointer_id`` would store them."""
    ring = keyring(runtime)
    with runtime.sessions() as session:
        handle = keys.key_for_write(session, ring, tenant_id, subject)
    return keys.seal_object(ring, tenant_id, handle, path, pointer_id, plaintext)


def tampered(data: bytes) -> bytes:
    """``data`` with its last byte changed, always (writing a fixed byte instead leaves the
    object intact whenever its last byte already was that one: one time in 256)."""
    return data[:-1] + bytes([data[-1] ^ 0xFF])
