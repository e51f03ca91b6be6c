"""Personal identifiers in audit rows: sealed under the data subject's key, never in clear.

The problem. An audit row is sealed into the tenant's hash chain, and a sealed row can never
be rewritten (``verify`` would, rightly, call that tampering). Yet after a data subject's
erasure nothing personal of theirs may stay in the control plane (DESIGN §11): not their
user id, nor the keys, titles or tags of their memories. Three ways were weighed:

- *scrub the rows at erasure*: breaks the chain, or needs a chain that tolerates edits, which
  is a chain that proves nothing;
- *pseudonyms* (a keyed hash of the user id or key): unreadable to humans, and whoever holds
  the hashing key can still confirm a guessed id forever — a pseudonym is not an erasure;
- *encrypt the personal part under the subject's key* (chosen): the row stores only
  ciphertext, the chain covers that ciphertext, and crypto-shredding the subject's key at
  erasure makes it unreadable while the stored bytes — and so every row hash — stay
  unchanged. ``verify`` keeps answering ok after an erasure.

So an audit row names a memory by ``pointer_id`` (a random UUID, meaningless once the pointer
is gone) and carries its scope type, version and size in clear; the address a human wants
(``<scope>/<scope ref> key=<key>``) follows as one token::

    sealed:<subject key id, 32 hex>:<base64url(nonce || AES-256-GCM ciphertext)>

under the same per-subject key that seals the memory's object (``control_plane.keys``: the
key of the pointer's data subject, else of its scope), with the tenant id and key id as
associated data so a token cannot be moved to another tenant or key. Sealing costs one
AES-GCM call on a few dozen bytes with a key the write already holds: the hot path makes no
extra round trip. ``GET /v1/audit`` shows the address decrypted while the key lives and
``[erased subject]`` once it was destroyed.

Where no key is at hand — a failure before the memory was found (not found, refused,
invalid), a listing filtered by user or scope ref, encryption switched off — the row holds no
address at all: scope type, pointer id when there is one, and the error code with every
occurrence of the scope ref and key cut out of the error's sentence. Titles and tags never
enter audit rows.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy.orm import Session

from storage_adapters.entropy import token_bytes

from ..errors import KeyServiceUnavailable
from ..plane.data_plane import SubjectKeys

ERASED = "[erased subject]"
UNREADABLE = "[sealed; unreadable]"
WITHHELD = "…"
TOKEN = re.compile(r"sealed:([0-9a-f]{32}):([A-Za-z0-9_-]+)")


def _aad(tenant_id: uuid.UUID, key_id: uuid.UUID) -> bytes:
    return b"memplane-audit-detail-v1" + tenant_id.bytes + key_id.bytes


def seal(tenant_id: uuid.UUID, key_id: uuid.UUID, key: bytes, text: str) -> str:
    """``text`` as a sealed token (see the module docstring)."""
    nonce = token_bytes(12)
    box = AESGCM(key).encrypt(nonce, text.encode(), _aad(tenant_id, key_id))
    return f"sealed:{key_id.hex}:{base64.urlsafe_b64encode(nonce + box).decode().rstrip('=')}"


def redact(text: str, private: Iterable[str | None]) -> str:
    """``text`` with every occurrence of each private string cut out (raw and %-encoded)."""
    from urllib.parse import quote

    for value in sorted({v for v in private if v}, key=len, reverse=True):
        for form in {value, quote(value, safe="")}:
            text = text.replace(form, WITHHELD)
    return text


def _open(tenant_id: uuid.UUID, key_id: uuid.UUID, key: bytes, blob: str) -> str:
    raw = base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4))
    return AESGCM(key).decrypt(raw[:12], raw[12:], _aad(tenant_id, key_id)).decode()


def reveal(session: Session, keys: SubjectKeys | None, tenant_id: uuid.UUID,
           details: Iterable[str]) -> list[str]:
    """The details with each sealed token opened, or marked erased/unreadable.

    One key lookup per distinct key in the page, through ``keys`` (the keys domain's, passed
    in by whoever holds it; unwrapped keys come from the keyring's cache); without it every
    token stays unreadable.
    """
    opened: dict[uuid.UUID, bytes | str] = {}

    def key_of(key_id: uuid.UUID) -> bytes | str:
        if key_id not in opened:
            if keys is None:
                opened[key_id] = UNREADABLE
                return UNREADABLE
            try:
                key = keys.unwrapped(session, tenant_id, key_id)
            except KeyServiceUnavailable:  # the KMS is down: the page still loads
                opened[key_id] = UNREADABLE
            else:
                opened[key_id] = ERASED if key is None else key
        return opened[key_id]

    def replace(match: re.Match[str]) -> str:
        key_id = uuid.UUID(match.group(1))
        key = key_of(key_id)
        if isinstance(key, str):
            return key
        try:
            return _open(tenant_id, key_id, key, match.group(2))
        except (InvalidTag, ValueError):
            return UNREADABLE

    return [TOKEN.sub(replace, detail) if "sealed:" in detail else detail
            for detail in details]
