"""An entry's object in the tenant's bucket: its path, the subject key it is sealed under, the
sealed put, and the checks before a pointer may adopt it; shared by the single writes
(``service``) and the group write (``group``)."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from ..addresses import MemoryAddress
from ..db.base import new_id
from ..errors import Conflict
from ..identity import Actor
from ..keys import subject_keys as keys
from ..memories import repository as memories_repo
from ..memories.api import key_destroyed
from ..memories.shared import keyring_of
from ..plane.data_plane import DataPlane, Target, storage_errors


def object_path(target: Target, address: MemoryAddress, pointer_id: uuid.UUID) -> str:
    """A fresh per-version path for the entry's object."""
    # "@" is never in a key's segment (keys are percent-encoded), so no key's directory
    # meets an entry's; both stay under memories/ where GC, integrity and erasure look.
    return target.path(f"{address.scope_dir()}/@entries/{pointer_id.hex}/{new_id().hex}.json")


def subject_key(session: Session, plane: DataPlane, actor: Actor, address: MemoryAddress,
                subject_user: str | None) -> keys.SubjectKeyHandle | None:
    """The live key of the entry's data subject (created if missing); None while encryption
    is off."""
    ring = keyring_of(plane)
    if not ring.enabled:
        return None
    subject = keys.subject_of(address.scope, address.scope_ref, subject_user)
    return keys.key_for_write(session, ring, actor.tenant_id, subject)


def put_object(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
               pointer_id: uuid.UUID, key: keys.SubjectKeyHandle | None, payload: bytes) -> str:
    """Step 2: the summary's bytes, sealed for the pointer, at a fresh path, create-only."""
    path = object_path(target, address, pointer_id)
    blob = keys.seal_object(keyring_of(plane), actor.tenant_id, key, path, pointer_id, payload)
    with storage_errors():
        target.adapter.put(path, blob)
    return path


def check_adoptable(session: Session, target: Target, path: str,
                    key: keys.SubjectKeyHandle | None) -> None:
    """The object may become the pointer's: its subject key still lives (no erasure of the
    subject completed since the lookup) and orphan GC has not marked it."""
    if key_destroyed(session, key) or memories_repo.gc_marked(session, target.config_id, [path]):
        raise Conflict("the entry's data subject changed while it was being written; retry")
