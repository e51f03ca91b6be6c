"""How the control plane names a data subject once their id must go: a keyed hash.

An erased subject (the erasure job, the earlier export and compactor jobs, the destroyed
key's tombstones) and a lifted legal hold keep ``hmac:<64 hex>``: HMAC-SHA256 of the UTF-8
user id under a per-tenant key derived from the server key (``MEMPLANE_SERVER_KEY``, on the
embedded default ``<data_dir>/server.key``), which never enters the database. The database
alone — a dump, a replica, a backup — therefore cannot test a guessed name against it; no
salt or other input is stored beside it. Whoever holds the server key can still confirm a
guess (a keyed hash is a pseudonym, not an erasure), which is what lets an operator answer
"was this person erased?".

The signed receipt names the subject as ``sha256(salt || utf8(user_id))`` so that an auditor
holding the receipt and the id can check it offline. Its salt is not stored either: it is
derived from the same server secret and the job id, left out of the stored receipt and put
back when the receipt is served (``compliance/receipts.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

from ..plane.credentials import CredentialBox

PREFIX = "hmac:"


def _key(credentials: CredentialBox | None, purpose: bytes, tenant_id: uuid.UUID) -> bytes:
    if credentials is None:
        raise RuntimeError("no server key to derive a subject pseudonym from; build the data "
                           "plane through Runtime")
    return credentials.derive_key(purpose + tenant_id.bytes)


def pseudonym(credentials: CredentialBox | None, tenant_id: uuid.UUID, user_id: str) -> str:
    """``hmac:<hex>``: the tenant's keyed hash of ``user_id``."""
    key = _key(credentials, b"memplane subject pseudonym v1", tenant_id)
    return PREFIX + hmac.new(key, user_id.encode("utf-8"), hashlib.sha256).hexdigest()


def receipt_salt(credentials: CredentialBox | None, tenant_id: uuid.UUID,
                 job_id: uuid.UUID) -> str:
    """The salt of an erasure receipt's subject hash (32 hex), recomputed, never stored."""
    key = _key(credentials, b"memplane receipt salt v1", tenant_id)
    return hmac.new(key, job_id.bytes, hashlib.sha256).hexdigest()[:32]


def salted_hash(salt_hex: str, user_id: str) -> str:
    """SHA-256(salt || UTF-8 user id), hex: the receipt's published form."""
    return hashlib.sha256(bytes.fromhex(salt_hex) + user_id.encode("utf-8")).hexdigest()
