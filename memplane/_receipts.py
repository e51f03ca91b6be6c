"""Offline verification of erasure receipts (no server needed).

The canonical form (the same on server and client): the receipt without its ``signature``
field, as JSON with keys sorted at every level, separators ``","`` and ``":"`` (no
whitespace), non-ASCII characters written as UTF-8, encoded as UTF-8. ``signature`` is the
base64 of the Ed25519 signature over those bytes.

Receipts and the audit chain's checkpoints are signed with the same key; each body names
its ``format`` and each verifier accepts only its own. Read a receipt file with
:func:`parse_receipt`, which refuses JSON that names a key twice: readers disagree on which
of two values counts, so a signature checked on one could be read with the other.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["canonical_receipt", "parse_receipt", "public_key_id", "verify_checkpoint",
           "verify_receipt"]

RECEIPT_FORMAT = "memplane-erasure-receipt/1"
CHECKPOINT_FORMAT = "memplane-audit-checkpoint/1"


class DuplicateKey(ValueError):
    """The JSON names the same key twice in one object."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"the JSON names the key {key!r} twice in one object; a signed "
                               "document never does, so this one was altered")
        seen[key] = value
    return seen


def parse_receipt(text: str | bytes) -> dict[str, Any]:
    """Read a receipt (or checkpoint) from JSON text, refusing duplicate keys and anything
    but a JSON object; raises ValueError with a sentence saying what is wrong."""
    data = json.loads(text, object_pairs_hook=_no_duplicates)
    if not isinstance(data, dict):
        raise ValueError("a receipt is a JSON object; this file holds something else")
    return data


def canonical_receipt(receipt: Mapping[str, Any]) -> bytes:
    """The bytes a receipt's signature covers."""
    unsigned = {key: value for key, value in receipt.items() if key != "signature"}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _load(public_key_pem: str | bytes) -> Ed25519PublicKey:
    pem = public_key_pem.encode() if isinstance(public_key_pem, str) else public_key_pem
    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("the public key is not an Ed25519 key")
    return key


def public_key_id(public_key_pem: str | bytes) -> str:
    """The ``key_id`` receipts signed by this key carry: SHA-256 of the raw key, 16 hex."""
    raw = _load(public_key_pem).public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def verify_receipt(receipt: Mapping[str, Any], public_key_pem: str | bytes) -> bool:
    """True when ``receipt`` is exactly what the holder of the key signed.

    Any change — a count, a date, a field added or removed, the signature itself — or a
    receipt signed by a different key gives False. A public key that is not Ed25519 PEM
    raises ValueError.
    """
    return _verify(receipt, public_key_pem, RECEIPT_FORMAT)


def verify_checkpoint(checkpoint: Mapping[str, Any], public_key_pem: str | bytes) -> bool:
    """True when an audit checkpoint (``audit/checkpoints/*.json`` in the tenant's bucket)
    is exactly what the holder of the key signed. Same rules as :func:`verify_receipt`."""
    return _verify(checkpoint, public_key_pem, CHECKPOINT_FORMAT)


def _verify(body: Mapping[str, Any], public_key_pem: str | bytes, fmt: str) -> bool:
    key = _load(public_key_pem)
    signature = body.get("signature")
    if not isinstance(signature, str) or body.get("format") != fmt:
        return False
    if body.get("key_id") != public_key_id(public_key_pem):
        return False
    try:
        key.verify(base64.b64decode(signature, validate=True), canonical_receipt(body))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True
