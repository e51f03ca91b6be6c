"""Key-encryption keys (KEKs) behind one small interface.

A provider wraps and unwraps 32-byte subject keys under a KEK it names with a ``key_ref``.
The control plane stores, per tenant, which provider and ``key_ref`` each KEK *version* is
(``kek_versions``) and every subject key wrapped by one of them (``subject_keys``); it never
stores KEK material.

    class KekProvider(Protocol):
        name: str                                   # stored with each KEK version
        def create(self, tenant_id) -> str          # a key_ref for a new KEK version
        def wrap(self, key_ref, key, context) -> bytes
        def unwrap(self, key_ref, blob, context) -> bytes    # KeyUnavailable on failure
        def destroy(self, key_ref) -> None          # a retired version's material goes

``context`` binds a wrapped subject key to its row (tenant id + subject key id): a wrapped
key copied onto another row, or another tenant's, does not unwrap.

Providers shipped here:

- ``local`` — a key ring file (JSON, mode 0600, default ``<data dir>/keyring.json``) holding
  random 256-bit KEKs, one set of versions per tenant; wrapping is AES-256-GCM with a random
  nonce and the context as associated data. Fit for the embedded default and one host;
  several hosts would need the same file, so use a KMS there. Updates take a lock file and
  replace the file atomically, so the CLI can rotate while the server runs.
- ``aws-kms`` — AWS KMS through boto3: ``Encrypt``/``Decrypt`` with the context as the KMS
  ``EncryptionContext`` (so CloudTrail shows which tenant/subject key each call served).
  ``create`` returns the configured key; KMS keeps older key material for decryption, so a
  KMS-side rotation needs nothing from us, and moving a tenant to another KMS key is a
  rotation here. ``destroy`` does nothing: deleting a customer's KMS key is their decision.

Other KMSs plug in the same way, as a class with these four methods registered in
:func:`provider_from_settings`:

- **GCP Cloud KMS** (``google-cloud-kms``): ``key_ref`` = the CryptoKey resource name
  ``projects/P/locations/L/keyRings/R/cryptoKeys/K``; ``wrap`` =
  ``client.encrypt(name=key_ref, plaintext=key, additional_authenticated_data=context)``,
  ``unwrap`` = ``client.decrypt(name=key_ref, ciphertext=blob,
  additional_authenticated_data=context)``; Cloud KMS picks the primary version on encrypt
  and the right version on decrypt.
- **Azure Key Vault** (``azure-keyvault-keys``): ``key_ref`` = the key id URL including its
  version; ``wrap`` = ``CryptographyClient(key_ref, credential).wrap_key(
  KeyWrapAlgorithm.rsa_oaep_256, key)``, ``unwrap`` = ``unwrap_key(...)``. Key Vault has no
  associated data, so prefix the context's SHA-256 to the key before wrapping and check it
  after unwrapping. ``create`` returns the vault key's current version id.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..settings import Settings


class KeyUnavailable(Exception):
    """A KEK could not be used (missing from the ring, access denied, or the KMS is down)."""


class WrongKey(Exception):
    """The KEK refused a wrapped key: it was wrapped by another key or for another row."""


class KekProvider(Protocol):
    name: str

    def create(self, tenant_id: uuid.UUID) -> str: ...

    def wrap(self, key_ref: str, key: bytes, context: bytes) -> bytes: ...

    def unwrap(self, key_ref: str, blob: bytes, context: bytes) -> bytes: ...

    def destroy(self, key_ref: str) -> None: ...


_NONCE = 12


class LocalKeyRing:
    """KEKs in a local JSON file: ``{"keks": {"<key_ref>": "<base64 key>"}}``."""

    name = "local"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @contextmanager
    def _exclusive(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _read(self) -> dict[str, bytes]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return {ref: base64.b64decode(value) for ref, value in raw.get("keks", {}).items()}

    def _write(self, keys: dict[str, bytes]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"format": 1, "keks": {ref: base64.b64encode(key).decode()
                                             for ref, key in keys.items()}}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def _key(self, key_ref: str) -> bytes:
        with self._lock:
            key = self._keys.get(key_ref)
            if key is None:  # another process (the CLI) may have added it: read again
                self._keys = self._read()
                key = self._keys.get(key_ref)
        if key is None:
            raise KeyUnavailable(f"KEK {key_ref} is not in the local key ring {self.path}")
        return key

    def create(self, tenant_id: uuid.UUID) -> str:
        key_ref = f"local:{tenant_id}:{secrets.token_hex(8)}"
        with self._lock, self._exclusive():
            keys = self._read()
            keys[key_ref] = AESGCM.generate_key(bit_length=256)
            self._write(keys)
            self._keys = keys
        return key_ref

    def wrap(self, key_ref: str, key: bytes, context: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + AESGCM(self._key(key_ref)).encrypt(nonce, key, context)

    def unwrap(self, key_ref: str, blob: bytes, context: bytes) -> bytes:
        try:
            return AESGCM(self._key(key_ref)).decrypt(blob[:_NONCE], blob[_NONCE:], context)
        except InvalidTag:
            raise WrongKey("a subject key did not unwrap with its KEK") from None

    def destroy(self, key_ref: str) -> None:
        with self._lock, self._exclusive():
            keys = self._read()
            keys.pop(key_ref, None)
            self._write(keys)
            self._keys = keys


class AwsKms:
    """AWS KMS: the KEK never leaves KMS; subject keys go through Encrypt/Decrypt."""

    name = "aws-kms"

    def __init__(self, key_id: str, *, region: str | None = None,
                 endpoint_url: str | None = None, access_key_id: str | None = None,
                 secret_access_key: str | None = None) -> None:
        try:
            import boto3
        except ImportError as exc:
            from storage_adapters.registry import MissingExtra

            raise MissingExtra(
                "MEMPLANE_KEK_PROVIDER=aws-kms needs boto3, which is not installed; install "
                "it with: pip install 'memplane[s3]'") from exc

        self.key_id = key_id
        self._client = boto3.client(
            "kms", region_name=region, endpoint_url=endpoint_url,
            aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
        )

    @staticmethod
    def _context(context: bytes) -> dict[str, str]:
        return {"memplane": base64.b64encode(context).decode()}

    def create(self, tenant_id: uuid.UUID) -> str:
        return self.key_id

    def wrap(self, key_ref: str, key: bytes, context: bytes) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.encrypt(KeyId=key_ref, Plaintext=key,
                                          EncryptionContext=self._context(context))
        except (BotoCoreError, ClientError) as exc:
            raise KeyUnavailable(f"KMS could not wrap a subject key: {_kms_error(exc)}") from None
        return bytes(answer["CiphertextBlob"])

    def unwrap(self, key_ref: str, blob: bytes, context: bytes) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.decrypt(KeyId=key_ref, CiphertextBlob=blob,
                                          EncryptionContext=self._context(context))
        except (BotoCoreError, ClientError) as exc:
            code = _kms_error(exc)
            if code in ("InvalidCiphertextException", "IncorrectKeyException"):
                raise WrongKey(f"KMS refused a wrapped subject key: {code}") from None
            raise KeyUnavailable(f"KMS could not unwrap a subject key: {code}") from None
        return bytes(answer["Plaintext"])

    def destroy(self, key_ref: str) -> None:
        return None


def _kms_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", type(exc).__name__))
    return type(exc).__name__


def provider_from_settings(settings: Settings) -> KekProvider:
    if settings.kek_provider == "aws-kms":
        assert settings.kek_aws_key_id is not None  # the settings validator ensures it
        secret = settings.kek_aws_secret_access_key
        return AwsKms(settings.kek_aws_key_id, region=settings.kek_aws_region,
                      endpoint_url=settings.kek_aws_endpoint_url,
                      access_key_id=settings.kek_aws_access_key_id,
                      secret_access_key=secret.get_secret_value() if secret else None)
    return LocalKeyRing(settings.resolved_keyring_path)
