"""Offline verification of erasure receipts (no server needed).

The canonical form (the same on server and client): the receipt without its ``signature``
field, as JSON with keys sorted at every level, separators ``","`` and ``":"`` (no
whitespace), non-ASCII characters written as UTF-8, encoded as UTF-8. ``signature`` is the
base64 of the Ed25519 signature over those bytes.
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

__all__ = ["canonical_receipt", "public_key_id", "verify_receipt"]


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
    key = _load(public_key_pem)
    signature = receipt.get("signature")
    if not isinstance(signature, str):
        return False
    if receipt.get("key_id") != public_key_id(public_key_pem):
        return False
    try:
        key.verify(base64.b64decode(signature, validate=True), canonical_receipt(receipt))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True
