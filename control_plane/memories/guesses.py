"""What a write's lookup would find, guessed from what this process last saw, so that a write
can seal and put its object before it looks anything up: one statement instead of two.

A guess names the row at the address (its pointer id), or no row, and the live key of the
subject the object is sealed for. Nothing in it is trusted: step 3 of the write protocol
(``hotpath_commit.commit_write``) checks, under the row's lock, everything the lookup would
have found — the row is the one guessed (an update needs its id; a guessed new row is inserted
only if there is none), its subject is unchanged, no erasure of the subject runs, the key
was not destroyed. A wrong guess saves nothing: the object goes and the write looks up as
usual (``write_fast.write_fast``).

A guess is taken only when it is cheap to be wrong about: an address this process saw (a
write of it committed, or a lookup found it), or a new address on a bucket whose puts are
cheap (``cheap_puts``: the local directory), where a wasted put costs about what the lookup
does. On a cloud bucket an unknown address is looked up first.

Kept per process, by digests of the addresses and subjects — no personal string, and no
key material (the key itself comes from the keyring's cache, which an erasure empties).
A row whose subject is a user other than its ``user`` scope's is not guessed (its user id
would have to be kept).
"""

from __future__ import annotations

import uuid
from typing import Any

from ..addresses import MemoryAddress, digest_of
from ..keys.subject_keys import subject_of
from .hotpath import WriteLookup
from .shared import subject_after_write

_MAX = 100_000
# The row's subject, as far as a guess may know it: none (the scope's key seals it), or the
# user of its ``user`` scope.
_NO_USER, _SCOPE_USER = 0, 1
_ROWS: dict[bytes, tuple[uuid.UUID, int]] = {}
_KEYS: dict[bytes, uuid.UUID] = {}


def _subject(tenant_id: uuid.UUID, subject: tuple[str, str]) -> bytes:
    return digest_of(str(tenant_id), *subject)


def _keep(cache: dict[bytes, Any], digest: bytes, value: Any) -> None:
    if len(cache) >= _MAX:
        cache.clear()
    cache[digest] = value


def saw_row(tenant_id: uuid.UUID, address: MemoryAddress, pointer_id: uuid.UUID,
            subject_user_id: str | None) -> None:
    """A committed write (or a lookup) found this row at the address."""
    if subject_user_id is None:
        _keep(_ROWS, address.digest(tenant_id), (pointer_id, _NO_USER))
    elif address.scope == "user" and subject_user_id == address.scope_ref:
        _keep(_ROWS, address.digest(tenant_id), (pointer_id, _SCOPE_USER))
    else:
        _ROWS.pop(address.digest(tenant_id), None)


def saw_key(tenant_id: uuid.UUID, subject: tuple[str, str], key_id: uuid.UUID) -> None:
    """A lookup found ``key_id`` to be the subject's live key."""
    _keep(_KEYS, _subject(tenant_id, subject), key_id)


def forget_row(tenant_id: uuid.UUID, address: MemoryAddress) -> None:
    """This process deleted the row at the address."""
    _ROWS.pop(address.digest(tenant_id), None)


def forget(tenant_id: uuid.UUID, address: MemoryAddress, subject: tuple[str, str]) -> None:
    """A guess about the address was wrong: take it again from a lookup."""
    forget_row(tenant_id, address)
    _KEYS.pop(_subject(tenant_id, subject), None)


def guess(tenant_id: uuid.UUID, address: MemoryAddress, meta_user: str | None, *,
          cheap_puts: bool, encrypted: bool
          ) -> tuple[WriteLookup, tuple[str, str], uuid.UUID | None] | None:
    """What the lookup of a write of the address would find (without its key), the subject
    whose key seals the object, and that key's id (None when objects are not encrypted);
    None: look it up."""
    row = _ROWS.get(address.digest(tenant_id))
    if row is None and not cheap_puts:
        return None
    found = WriteLookup(None, None, None, None)
    if row is not None:
        found = WriteLookup(row[0], address.scope_ref if row[1] == _SCOPE_USER else None,
                            None, None)
    subject = subject_of(address.scope, address.scope_ref, subject_after_write(
        address, meta_user, found.pointer_id is not None, found.subject_user_id))
    key_id = _KEYS.get(_subject(tenant_id, subject)) if encrypted else None
    if encrypted and key_id is None:
        return None
    return found, subject, key_id

