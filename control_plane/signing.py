"""The Ed25519 key that signs erasure receipts, and the canonical form it signs.

Canonical form: the receipt without its ``signature`` field, serialised as JSON with keys
sorted at every level, no insignificant whitespace (``separators=(",", ":")``), non-ASCII
characters kept as UTF-8 (``ensure_ascii=False``), encoded as UTF-8. Receipts contain only
strings, integers, booleans, null, lists and objects (no floats), so every JSON library
reproduces the same bytes. ``signature`` is the base64 of the 64-byte Ed25519 signature over
those bytes; ``key_id`` (inside the signed body) is the first 16 hex digits of the SHA-256 of
the raw 32-byte public key.

Where the key comes from: ``MEMPLANE_RECEIPT_SIGNING_KEY`` (base64 of the 32 raw private
bytes, or a PKCS#8 PEM); else, on the embedded default, a key generated once into
``<data_dir>/receipt-signing.key`` (mode 0600); else, on a shared deployment, a key derived
with HKDF from ``MEMPLANE_SERVER_KEY``, which every replica has — so replicas never sign
with keys of their own. A signing key is only as strong as what it comes from, so the server
key is used only when it carries at least 32 random bytes (64 hex digits, or base64 of 32
bytes or more); a shorter one is refused with a sentence asking for a dedicated key.

The same key signs the audit chain's checkpoints (``control_plane/audit/checkpoints.py``):
one public key for an auditor to pin. The two never pass for each other: every signed body
names its ``format``, and each verifier accepts only its own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import DomainError
from .secret_strength import random_bytes_in
from .settings import Settings

KEY_FILE = "receipt-signing.key"


class SigningKeyMissing(DomainError):
    status_code = 503
    code = "receipt_signing_key_missing"


def canonical(body: dict[str, Any]) -> bytes:
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False).encode("utf-8")


@dataclass(frozen=True)
class SigningKey:
    private: Ed25519PrivateKey

    @property
    def public_raw(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.Raw,
                                                      serialization.PublicFormat.Raw)

    @property
    def key_id(self) -> str:
        return hashlib.sha256(self.public_raw).hexdigest()[:16]

    def public_pem(self) -> str:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()

    def sign(self, body: dict[str, Any]) -> str:
        return base64.b64encode(self.private.sign(canonical(body))).decode()


_cache: dict[str, SigningKey] = {}
_lock = threading.Lock()


def signing_key(settings: Settings) -> SigningKey:
    configured = settings.receipt_signing_key
    if configured:
        cache_key = "setting:" + _fingerprint(configured.get_secret_value())
    elif settings.embedded or settings.server_key is None:
        cache_key = str(settings.data_dir.resolve())
    else:
        cache_key = "derived:" + _fingerprint(settings.server_key.get_secret_value())
    with _lock:
        key = _cache.get(cache_key)
        if key is None:
            if configured:
                key = SigningKey(_parse(configured.get_secret_value()))
            elif settings.embedded:
                key = SigningKey(_load_or_create(settings))
            elif settings.server_key is not None:
                key = SigningKey(_derived(settings.server_key.get_secret_value()))
            else:
                raise SigningKeyMissing(
                    "no receipt signing key is configured; set MEMPLANE_RECEIPT_SIGNING_KEY "
                    "to the same Ed25519 key (base64 of 32 bytes, or PEM) on every replica"
                )
            _cache[cache_key] = key
        return key


def _fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


MIN_SERVER_KEY_BYTES = 32


def _derived(server_key: str) -> Ed25519PrivateKey:
    """Every replica shares the server key, so a key derived from it is the same on all of
    them; a dedicated MEMPLANE_RECEIPT_SIGNING_KEY is still preferred (it can outlive a
    server-key rotation). A short or patterned server key would make receipts forgeable by
    whoever guesses it, so it is refused rather than stretched."""
    if random_bytes_in(server_key) < MIN_SERVER_KEY_BYTES:
        raise SigningKeyMissing(
            "MEMPLANE_SERVER_KEY is too short to derive the receipt signing key from (it needs "
            "32 random bytes: 64 hex digits or 43 base64 characters); set "
            "MEMPLANE_RECEIPT_SIGNING_KEY to a dedicated Ed25519 key (base64 of 32 bytes, or "
            "PEM), the same on every replica, or use a longer random server key"
        )
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=b"memplane receipt signing v1").derive(server_key.encode())
    return Ed25519PrivateKey.from_private_bytes(seed)


def _parse(value: str) -> Ed25519PrivateKey:
    text = value.strip()
    if text.startswith("-----BEGIN"):
        loaded = serialization.load_pem_private_key(text.encode(), password=None)
        if not isinstance(loaded, Ed25519PrivateKey):
            raise SigningKeyMissing("MEMPLANE_RECEIPT_SIGNING_KEY is a PEM key but not Ed25519")
        return loaded
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raw = b""
    if len(raw) != 32:
        raise SigningKeyMissing("MEMPLANE_RECEIPT_SIGNING_KEY must be base64 of 32 raw bytes "
                                "or an Ed25519 PEM private key")
    return Ed25519PrivateKey.from_private_bytes(raw)


def _load_or_create(settings: Settings) -> Ed25519PrivateKey:
    path = settings.data_dir / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        try:  # link fails if the file exists: two processes starting together keep one key
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    return _parse(path.read_text())
