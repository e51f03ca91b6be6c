"""Tenant bucket credentials, encrypted at rest with the server key.

The server key (``MEMPLANE_SERVER_KEY``) is stretched with HKDF-SHA256 into an AES-256-GCM
key. Each blob is ``version byte || 12-byte nonce || ciphertext+tag`` and is bound to its
row by the associated data (tenant id and configuration id), so a blob copied onto another
row does not decrypt. On the embedded default with no key set, one is generated once into
``<data_dir>/server.key`` (mode 0600) and reused on every start.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import uuid
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..settings import Settings

_VERSION = b"\x01"
_NONCE = 12
KEY_FILE = "server.key"


class CredentialsUnreadable(Exception):
    """The stored credentials do not decrypt with this server's key."""


def load_server_key(settings: Settings) -> str:
    """The configured server key, or on the embedded default the generated key file's."""
    if settings.server_key is not None and settings.server_key.get_secret_value():
        return settings.server_key.get_secret_value()
    if not settings.embedded:
        raise ValueError("MEMPLANE_SERVER_KEY must be set outside the embedded default")
    path = Path(settings.data_dir) / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text().strip()
        if len(key) < 32:
            raise ValueError(f"{path} is damaged: it must hold the generated server key") \
                from None
        return key
    key = secrets.token_urlsafe(48)
    try:
        os.write(fd, key.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def associated_data(tenant_id: uuid.UUID, config_id: uuid.UUID) -> bytes:
    return f"memplane storage_configs {tenant_id} {config_id}".encode()


class CredentialBox:
    """Seals and opens the secret part of a storage configuration."""

    def __init__(self, server_key: str) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                   info=b"memplane storage credentials v1").derive(server_key.encode())
        self._aead = AESGCM(key)
        self._derivation = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                                info=b"memplane derived keys v1").derive(server_key.encode())

    def derive_key(self, purpose: bytes) -> bytes:
        """A 32-byte key for ``purpose`` (e.g. a tenant's search index), derived from the
        server key: the database alone cannot recompute it."""
        return hmac.new(self._derivation, purpose, hashlib.sha256).digest()

    def seal(self, values: dict[str, str], *, aad: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        plain = json.dumps(values, separators=(",", ":"), sort_keys=True).encode()
        return _VERSION + nonce + self._aead.encrypt(nonce, plain, aad)

    def open(self, blob: bytes, *, aad: bytes) -> dict[str, str]:
        if blob[:1] != _VERSION or len(blob) < 1 + _NONCE + 16:
            raise CredentialsUnreadable("unknown credentials format")
        try:
            plain = self._aead.decrypt(blob[1:1 + _NONCE], blob[1 + _NONCE:], aad)
        except InvalidTag:
            raise CredentialsUnreadable(
                "the stored credentials do not decrypt with this server key") from None
        values = json.loads(plain)
        if not isinstance(values, dict):
            raise CredentialsUnreadable("the stored credentials are not a JSON object")
        return {str(k): str(v) for k, v in values.items()}
