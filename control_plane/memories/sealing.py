"""What a memory's new object is sealed for, and sealing it at a fresh per-version path:
shared by the write protocol's general path (``write_general``) and its fast path
(``write_fast``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..addresses import MemoryAddress
from ..db.base import new_id
from ..identity import Actor
from ..keys import subject_keys as keys
from ..plane.data_plane import DataPlane, Target
from .shared import keyring_of


@dataclass(frozen=True)
class Binding:
    """What a new object is sealed for: the pointer id in its associated data, and the
    subject key (None while encryption is off). Both are known before the put."""

    pointer_id: uuid.UUID
    key: keys.SubjectKeyHandle | None


def seal(plane: DataPlane, target: Target, actor: Actor, address: MemoryAddress,
         payload: bytes, binding: Binding) -> tuple[str, bytes]:
    """A fresh per-version path for the object, and its bytes sealed for that path."""
    path = target.path(address.object_path(new_id().hex))
    return path, keys.seal_object(keyring_of(plane), actor.tenant_id, binding.key, path,
                                  binding.pointer_id, payload)
