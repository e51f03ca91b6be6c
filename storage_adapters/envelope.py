"""Envelope encryption of one stored object (DESIGN §6): AES-256-GCM, chunked, self-describing.

Every object gets a fresh random 256-bit **data key**. The data key is wrapped with the
**subject key** (AES key wrap, RFC 3394: 40 bytes, and a wrong subject key fails the unwrap's
own integrity check) and kept in the object's header; the subject key itself lives only in the
control plane, wrapped by the tenant's key-encryption key. Nothing here knows about KEKs, so
rotating a KEK never touches an object.

Layout (all integers big-endian)::

    header (76 bytes)
      magic            4   b"MPE\\x1e"
      format version   1   1
      flags            1   0 (reserved)
      subject key id  16   UUID of the subject key that wraps the data key
      wrapped data key 40  AES-KW(subject key, data key)
      chunk size       4   plaintext bytes per chunk (65,536 by default)
      plaintext size   8   total plaintext bytes, so the number of chunks is known
      (2 bytes reserved, zero)
    chunk 0 .. n-1     each: nonce (12, random) || ciphertext || GCM tag (16)

An empty plaintext still has one (empty) chunk, so "every chunk was cut off" is detectable.

What each chunk's GCM associated data binds, and why:

- the **whole header** — so key id, sizes and the wrapped key cannot be swapped or edited;
- the **context** given by the caller (see :func:`associated_data`): tenant id, object path,
  the object's version id and the pointer id. A blob copied to another path, another
  tenant's prefix, or left behind as an older version and then named by a pointer, fails;
- the **chunk index** and a **last-chunk flag** — so chunks cannot be reordered, dropped,
  duplicated, or the object truncated at a chunk boundary.

Any failure — wrong key, edited byte, truncation, trailing bytes, a swapped object, a
non-envelope object — raises one :class:`DecryptionError` and never returns partial bytes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import IO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from .base import IntegrityError
from .entropy import token_bytes

MAGIC = b"MPE\x1e"
FORMAT_VERSION = 1
DEFAULT_CHUNK = 64 * 1024
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
WRAPPED_BYTES = KEY_BYTES + 8
_HEADER = struct.Struct(">4sBB16s40sIQ2x")
HEADER_BYTES = _HEADER.size
_MAX_CHUNK = 16 * 1024 * 1024


class DecryptionError(IntegrityError):
    """The object is not a valid envelope for this key and context; nothing was decrypted."""


@dataclass(frozen=True, slots=True)
class Header:
    version: int
    key_id: uuid.UUID
    wrapped_key: bytes
    chunk_size: int
    plaintext_size: int
    raw: bytes

    @property
    def chunks(self) -> int:
        return max(1, -(-self.plaintext_size // self.chunk_size))


def new_key() -> bytes:
    """A random 256-bit key (data key or subject key)."""
    return token_bytes(KEY_BYTES)


def associated_data(tenant_id: uuid.UUID, path: str, version_id: str,
                    pointer_id: uuid.UUID | None) -> bytes:
    """The context an object is bound to: each field length-prefixed, so none can bleed into
    the next (``a|bc`` and ``ab|c`` differ)."""
    fields = [b"memplane-object-v1", tenant_id.bytes, path.encode(), version_id.encode(),
              pointer_id.bytes if pointer_id is not None else b""]
    return b"".join(struct.pack(">I", len(f)) + f for f in fields)


def sealed_size(plaintext_size: int, chunk_size: int = DEFAULT_CHUNK) -> int:
    """The stored size of ``plaintext_size`` bytes sealed in chunks of ``chunk_size``: the
    most a read of an object whose pointer says ``plaintext_size`` may take from the bucket
    (an object stored without encryption is the plaintext itself, smaller)."""
    chunks = max(1, -(-max(0, plaintext_size) // chunk_size))
    return HEADER_BYTES + chunks * (NONCE_BYTES + TAG_BYTES) + max(0, plaintext_size)


def is_envelope(blob: bytes) -> bool:
    return blob[:4] == MAGIC


def read_header(blob: bytes) -> Header:
    if len(blob) < HEADER_BYTES or not is_envelope(blob):
        raise DecryptionError("the object is not an encrypted memplane object")
    magic, version, _flags, key_id, wrapped, chunk, size = _HEADER.unpack_from(blob)
    if version != FORMAT_VERSION:
        raise DecryptionError(f"unknown encryption format version {version}")
    if not 0 < chunk <= _MAX_CHUNK:
        raise DecryptionError("the object's header is damaged")
    return Header(version, uuid.UUID(bytes=key_id), wrapped, chunk, size,
                  blob[:HEADER_BYTES])


def _chunk_aad(header: bytes, context: bytes, index: int, last: bool) -> bytes:
    return header + context + struct.pack(">QB", index, 1 if last else 0)


def seal(plaintext: bytes, *, key_id: uuid.UUID, subject_key: bytes, context: bytes,
         chunk_size: int = DEFAULT_CHUNK) -> bytes:
    """Encrypt ``plaintext`` under a fresh data key wrapped by ``subject_key``."""
    if not 0 < chunk_size <= _MAX_CHUNK:
        raise ValueError(f"chunk_size must be between 1 and {_MAX_CHUNK}")
    data_key = new_key()
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, key_id.bytes,
                          aes_key_wrap(subject_key, data_key), chunk_size, len(plaintext))
    aead = AESGCM(data_key)
    count = max(1, -(-len(plaintext) // chunk_size))
    parts = [header]
    view = memoryview(plaintext)
    for index in range(count):
        nonce = token_bytes(NONCE_BYTES)
        piece = bytes(view[index * chunk_size:(index + 1) * chunk_size])
        aad = _chunk_aad(header, context, index, index == count - 1)
        parts.append(nonce + aead.encrypt(nonce, piece, aad))
    return b"".join(parts)


def open_sealed(blob: bytes, *, subject_key: bytes, context: bytes,
                header: Header | None = None) -> bytes:
    """Decrypt and authenticate every chunk; any mismatch raises :class:`DecryptionError`."""
    header = header or read_header(blob)
    try:
        data_key = aes_key_unwrap(subject_key, header.wrapped_key)
    except InvalidUnwrap:
        raise DecryptionError(
            "the object's data key does not unwrap with its subject key (wrong key or "
            "tampered header)"
        ) from None
    count = header.chunks
    full = NONCE_BYTES + header.chunk_size + TAG_BYTES
    last_plain = header.plaintext_size - (count - 1) * header.chunk_size
    expected = HEADER_BYTES + (count - 1) * full + NONCE_BYTES + last_plain + TAG_BYTES
    if len(blob) != expected:
        raise DecryptionError(
            f"the object is {len(blob)} bytes but its header promises {expected} "
            f"(truncated or extended)"
        )
    aead = AESGCM(data_key)
    out = []
    offset = HEADER_BYTES
    for index in range(count):
        size = full if index < count - 1 else NONCE_BYTES + last_plain + TAG_BYTES
        nonce = blob[offset:offset + NONCE_BYTES]
        body = blob[offset + NONCE_BYTES:offset + size]
        offset += size
        aad = _chunk_aad(header.raw, context, index, index == count - 1)
        try:
            out.append(aead.decrypt(nonce, body, aad))
        except InvalidTag:
            raise DecryptionError(
                f"chunk {index} of the object failed authentication (edited, reordered, or "
                f"bound to another tenant, path, version or pointer)"
            ) from None
    return b"".join(out)


# -- streamed, for objects too large to hold in memory (export archives) ----------------------


def seal_stream(src: IO[bytes], dst: IO[bytes], size: int, *, key_id: uuid.UUID,
                subject_key: bytes, context: bytes, chunk_size: int = DEFAULT_CHUNK) -> None:
    """:func:`seal` for ``size`` bytes read from ``src``, written to ``dst`` one chunk at a
    time; the output is byte-for-byte the format :func:`open_sealed` reads."""
    if not 0 < chunk_size <= _MAX_CHUNK:
        raise ValueError(f"chunk_size must be between 1 and {_MAX_CHUNK}")
    data_key = new_key()
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, key_id.bytes,
                          aes_key_wrap(subject_key, data_key), chunk_size, size)
    dst.write(header)
    aead = AESGCM(data_key)
    count = max(1, -(-size // chunk_size))
    for index in range(count):
        want = min(chunk_size, size - index * chunk_size)
        piece = src.read(want)
        if len(piece) != want:
            raise ValueError(f"the source ended {size - index * chunk_size - len(piece)} "
                             "bytes early")
        nonce = token_bytes(NONCE_BYTES)
        aad = _chunk_aad(header, context, index, index == count - 1)
        dst.write(nonce + aead.encrypt(nonce, piece, aad))


def open_stream(src: IO[bytes], dst: IO[bytes], *, header: Header, subject_key: bytes,
                context: bytes) -> None:
    """:func:`open_sealed` from a file positioned just after ``header`` (read with
    :func:`read_header` from its first :data:`HEADER_BYTES`), plaintext written to ``dst``.

    Raises :class:`DecryptionError` on any mismatch, as :func:`open_sealed`; ``dst`` may then
    hold the chunks that opened before it, so the caller discards it.
    """
    try:
        data_key = aes_key_unwrap(subject_key, header.wrapped_key)
    except InvalidUnwrap:
        raise DecryptionError(
            "the object's data key does not unwrap with its subject key (wrong key or "
            "tampered header)"
        ) from None
    aead = AESGCM(data_key)
    count = header.chunks
    for index in range(count):
        plain = min(header.chunk_size, header.plaintext_size - index * header.chunk_size)
        size = NONCE_BYTES + plain + TAG_BYTES
        piece = src.read(size)
        if len(piece) != size:
            raise DecryptionError("the object is shorter than its header promises (truncated)")
        aad = _chunk_aad(header.raw, context, index, index == count - 1)
        try:
            dst.write(aead.decrypt(piece[:NONCE_BYTES], piece[NONCE_BYTES:], aad))
        except InvalidTag:
            raise DecryptionError(
                f"chunk {index} of the object failed authentication (edited, reordered, or "
                f"bound to another tenant, path, version or pointer)"
            ) from None
    if src.read(1):
        raise DecryptionError("the object is longer than its header promises (extended)")
