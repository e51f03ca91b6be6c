"""What the write, read and delete paths of memories by key share: the key-scope check,
the subject key a path needs, the audit address sealed under it. (The protocol steps other
domains share too — quiet object deletes, uncertain commits — are in ``api.py``.)
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from ..addresses import MemoryAddress
from ..audit import sealed
from ..db.base import utcnow
from ..db.models import MemoryPointer
from ..identity import Access, Actor
from ..keys import subject_keys as keys
from ..plane.data_plane import DataPlane
from ..plane.keyring import Keyring
from ..tenants.access import ensure_in_scopes
from ..tenants.access import ensure_visible as access_check
from . import hotpath


def ensure_visible(session: Session, actor: Actor, access: Access, address: MemoryAddress,
                   operation: str, user_id: str | None = None) -> None:
    """404 "no memory at …" for an address outside the key's scopes, as if it were missing
    (``user_id``: the data subject of the memory found there, for a user key's read)."""
    access_check(session, actor, access, address.scope, address.scope_ref,
                 operation=operation, what=f"{address.scope} memory",
                 missing=f"no memory at {address.describe()}", user_id=user_id)


def ensure_in_scope(session: Session, actor: Actor, access: Access, address: MemoryAddress,
                    operation: str) -> None:
    """403 "this key's scopes do not include …" for a write or delete outside the key's
    scopes (checked before anything is looked up there)."""
    ensure_in_scopes(session, actor, access, address.scope, address.scope_ref,
                     operation=operation, what=f"{address.scope} memory")


def given(value: str | None) -> str:
    return "None" if value is None else "(given)"


def keyring_of(plane: DataPlane) -> Keyring:
    if plane.keys is None:
        raise RuntimeError("the data plane has no keyring; build it through Runtime")
    return plane.keys


def read_key(session: Session, plane: DataPlane, actor: Actor,
             live: hotpath.KeyRow | None) -> keys.SubjectKeyHandle | None:
    """The live key the read's lookup found, unwrapped (from the cache: the read used it)."""
    if live is None or live.wrapped_key is None:
        return None
    return keys.handle_of(session, keyring_of(plane), actor.tenant_id, live.id, ("", ""),
                          live.wrapped_key, live.kek_version_id)


def sealed_address(actor: Actor, address: MemoryAddress,
                   key: keys.SubjectKeyHandle | None) -> str:
    """The audit row's address, sealed under the memory's subject key (``audit.sealed``);
    nothing without a key: the row's pointer id names the memory."""
    if key is None:
        return ""
    return " " + sealed.seal(actor.tenant_id, key.id, key.key, address.describe())


# The id of the live key of each address's subject as a read or write of it last found it
# (None: no key, encryption off), by a digest of the address (no personal string is kept;
# no key material either — the key itself comes from the keyring's cache, which an erasure
# empties): the guess a later read seals its audit row under, in its one lookup statement,
# which checks it.
UNKNOWN: Any = object()
_KEYS: dict[bytes, uuid.UUID | None] = {}
_KEYS_MAX = 100_000


def key_guess(tenant_id: uuid.UUID, address: MemoryAddress) -> Any:
    """The remembered live key id of the address's subject (or None), or UNKNOWN."""
    return _KEYS.get(address.digest(tenant_id), UNKNOWN)


def guessed_key(plane: DataPlane, tenant_id: uuid.UUID, address: MemoryAddress
                ) -> tuple[bool, uuid.UUID | None, keys.SubjectKeyHandle | None]:
    """Whether a read of the address can write its audit row in its lookup statement: the
    remembered live key id of its subject (None: no key) is known and, if any, the keyring
    still holds it unwrapped to seal the row's detail. Then also the guess and its handle."""
    guess = key_guess(tenant_id, address)
    if guess is None:
        return True, None, None
    if not isinstance(guess, uuid.UUID):
        return False, None, None
    key = keyring_of(plane).cache.get(guess)
    if key is None:
        return False, None, None
    return True, guess, keys.SubjectKeyHandle(guess, "", "", key)


def remember_key(tenant_id: uuid.UUID, address: MemoryAddress,
                 key_id: uuid.UUID | None) -> None:
    if len(_KEYS) >= _KEYS_MAX:
        _KEYS.clear()
    _KEYS[address.digest(tenant_id)] = key_id


def subject_after_write(address: MemoryAddress, meta_user: str | None, exists: bool,
                        current: str | None) -> str | None:
    """The data subject a row will have after a write: the one given, else the existing
    row's, else (for a new row) the user of a ``user`` scope."""
    if meta_user is not None:
        return meta_user
    if exists:
        return current
    return address.user_ref


def expired(pointer: MemoryPointer) -> bool:
    return pointer.expires_at is not None and pointer.expires_at <= utcnow()
