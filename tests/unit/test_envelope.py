"""The object envelope: round trips, and every kind of damage gives one DecryptionError."""

from __future__ import annotations

import uuid

import pytest

from storage_adapters import envelope
from storage_adapters.base import IntegrityError
from storage_adapters.envelope import DecryptionError

KEY = envelope.new_key()
KEY_ID = uuid.uuid4()
TENANT, POINTER = uuid.uuid4(), uuid.uuid4()
PATH = "tenants/t/memories/user/u1/k/0001.json"
CONTEXT = envelope.associated_data(TENANT, PATH, "0001", POINTER)
CHUNK = 1024


def _seal(plaintext: bytes, chunk: int = CHUNK) -> bytes:
    return envelope.seal(plaintext, key_id=KEY_ID, subject_key=KEY, context=CONTEXT,
                         chunk_size=chunk)


def _open(blob: bytes, *, key: bytes = KEY, context: bytes = CONTEXT) -> bytes:
    return envelope.open_sealed(blob, subject_key=key, context=context)


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 7])
def test_round_trip_at_every_chunk_boundary(size: int) -> None:
    plaintext = bytes(i % 251 for i in range(size))
    blob = _seal(plaintext)
    chunks = max(1, -(-size // CHUNK))
    assert len(blob) == envelope.HEADER_BYTES + size + chunks * (12 + 16)
    assert envelope.read_header(blob).key_id == KEY_ID
    assert _open(blob) == plaintext


def test_same_plaintext_seals_differently_each_time() -> None:
    assert _seal(b"same") != _seal(b"same")


def test_default_chunk_is_64_kib() -> None:
    blob = envelope.seal(b"x" * 200_000, key_id=KEY_ID, subject_key=KEY, context=CONTEXT)
    header = envelope.read_header(blob)
    assert (header.chunk_size, header.chunks) == (65536, 4)
    assert envelope.open_sealed(blob, subject_key=KEY, context=CONTEXT) == b"x" * 200_000


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1:]


BLOB = _seal(b"secret memory " * 300)  # 4,200 bytes: five chunks


@pytest.mark.parametrize("at", [
    0,                      # magic
    5,                      # flags (reserved, bound as associated data)
    6,                      # subject key id
    30,                     # wrapped data key
    62,                     # chunk size
    70,                     # plaintext size
    envelope.HEADER_BYTES,  # first chunk's nonce
    envelope.HEADER_BYTES + 40,  # first chunk's ciphertext
    len(BLOB) - 1,          # last chunk's tag
])
def test_a_flipped_byte_anywhere_is_an_integrity_error(at: int) -> None:
    with pytest.raises(DecryptionError):
        _open(_flip(BLOB, at))


@pytest.mark.parametrize("cut", [1, 16, CHUNK + 28, len(BLOB) - envelope.HEADER_BYTES])
def test_truncation_is_detected(cut: int) -> None:
    with pytest.raises(DecryptionError, match="truncated|not an encrypted"):
        _open(BLOB[:-cut])


def test_truncation_to_whole_chunks_with_a_forged_size_fails_authentication() -> None:
    # Drop the last chunk and shrink the declared size to match: the header is bound to
    # every chunk and the new last chunk was not sealed as last, so it still fails.
    header = envelope.read_header(BLOB)
    full = 12 + CHUNK + 16
    kept = BLOB[:envelope.HEADER_BYTES + 4 * full]
    forged_header = (header.raw[:66] + (4 * CHUNK).to_bytes(8, "big") + header.raw[74:])
    with pytest.raises(DecryptionError, match="failed authentication"):
        _open(forged_header + kept[envelope.HEADER_BYTES:])


def test_reordered_chunks_fail() -> None:
    full = 12 + CHUNK + 16
    start = envelope.HEADER_BYTES
    first, second = BLOB[start:start + full], BLOB[start + full:start + 2 * full]
    swapped = BLOB[:start] + second + first + BLOB[start + 2 * full:]
    with pytest.raises(DecryptionError, match="chunk 0"):
        _open(swapped)


def test_appended_bytes_fail() -> None:
    with pytest.raises(DecryptionError, match="extended"):
        _open(BLOB + b"\x00")


def test_wrong_subject_key_fails_at_the_unwrap() -> None:
    with pytest.raises(DecryptionError, match="does not unwrap"):
        _open(BLOB, key=envelope.new_key())


@pytest.mark.parametrize("context", [
    envelope.associated_data(uuid.uuid4(), PATH, "0001", POINTER),        # another tenant
    envelope.associated_data(TENANT, PATH.replace("/k/", "/j/"), "0001", POINTER),  # path
    envelope.associated_data(TENANT, PATH, "0002", POINTER),              # version
    envelope.associated_data(TENANT, PATH, "0001", uuid.uuid4()),         # pointer
    envelope.associated_data(TENANT, PATH, "0001", None),                 # no pointer
], ids=["tenant", "path", "version", "pointer", "no-pointer"])
def test_every_bound_field_matters(context: bytes) -> None:
    with pytest.raises(DecryptionError, match="failed authentication"):
        _open(BLOB, context=context)


def test_plaintext_and_garbage_are_not_envelopes() -> None:
    for blob in (b'{"v":1}', b"", envelope.MAGIC):
        with pytest.raises(DecryptionError, match="not an encrypted"):
            _open(blob)


def test_one_error_class_for_the_storage_layer() -> None:
    assert issubclass(DecryptionError, IntegrityError)


def test_associated_data_fields_cannot_bleed_into_each_other() -> None:
    a = envelope.associated_data(TENANT, "ab", "c", POINTER)
    b = envelope.associated_data(TENANT, "a", "bc", POINTER)
    assert a != b
