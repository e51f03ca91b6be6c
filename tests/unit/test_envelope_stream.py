"""The streamed envelope (export archives): byte-for-byte the format of the in-memory one,
every chunk boundary, and each kind of damage refused with its own sentence."""

from __future__ import annotations

import io
import uuid

import pytest

from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

KEY = envelope.new_key()
KEY_ID = uuid.uuid4()
CONTEXT = envelope.associated_data(uuid.uuid4(), "tenants/t/exports/e.tar", "0001", uuid.uuid4())
CHUNK = 1024


def _seal_stream(plaintext: bytes, size: int | None = None) -> bytes:
    out = io.BytesIO()
    envelope.seal_stream(io.BytesIO(plaintext), out, len(plaintext) if size is None else size,
                         key_id=KEY_ID, subject_key=KEY, context=CONTEXT, chunk_size=CHUNK)
    return out.getvalue()


def _open_stream(blob: bytes, *, context: bytes = CONTEXT) -> bytes:
    src, out = io.BytesIO(blob), io.BytesIO()
    header = envelope.read_header(src.read(envelope.HEADER_BYTES))
    envelope.open_stream(src, out, header=header, subject_key=KEY, context=context)
    return out.getvalue()


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 7])
def test_streamed_round_trip_at_every_chunk_boundary_in_the_in_memory_format(size: int) -> None:
    plaintext = bytes(i % 251 for i in range(size))
    blob = _seal_stream(plaintext)
    chunks = max(1, -(-size // CHUNK))
    assert len(blob) == envelope.HEADER_BYTES + size + chunks * (12 + 16)
    assert envelope.sealed_size(size, CHUNK) == len(blob)
    header = envelope.read_header(blob)
    assert (header.key_id, header.chunk_size, header.plaintext_size, header.chunks) == (
        KEY_ID, CHUNK, size, chunks)
    assert _open_stream(blob) == plaintext
    # the streamed format is the in-memory one: each opens the other's output
    assert envelope.open_sealed(blob, subject_key=KEY, context=CONTEXT) == plaintext
    sealed = envelope.seal(plaintext, key_id=KEY_ID, subject_key=KEY, context=CONTEXT,
                           chunk_size=CHUNK)
    assert _open_stream(sealed) == plaintext


def test_a_source_shorter_than_its_size_is_refused_with_the_missing_byte_count() -> None:
    with pytest.raises(ValueError) as caught:
        _seal_stream(b"x" * (CHUNK + 10), size=CHUNK + 50)
    assert str(caught.value) == "the source ended 40 bytes early"


def test_a_streamed_object_cut_short_is_refused_as_truncated() -> None:
    blob = _seal_stream(b"y" * (2 * CHUNK + 5))
    with pytest.raises(DecryptionError) as caught:
        _open_stream(blob[:-1])
    assert "shorter than its header promises" in str(caught.value)


def test_a_streamed_object_with_trailing_bytes_is_refused_as_extended() -> None:
    blob = _seal_stream(b"z" * (CHUNK + 5))
    with pytest.raises(DecryptionError) as caught:
        _open_stream(blob + b"\x00")
    assert "longer than its header promises" in str(caught.value)


def test_a_streamed_object_under_another_context_fails_its_first_chunk() -> None:
    blob = _seal_stream(b"w" * (CHUNK + 5))
    other = envelope.associated_data(uuid.uuid4(), "tenants/t/exports/e.tar", "0001", uuid.uuid4())
    with pytest.raises(DecryptionError) as caught:
        _open_stream(blob, context=other)
    assert str(caught.value).startswith("chunk 0 of the object failed authentication")


def test_a_streamed_object_with_a_wrong_subject_key_does_not_unwrap() -> None:
    blob = _seal_stream(b"v" * 10)
    src = io.BytesIO(blob)
    header = envelope.read_header(src.read(envelope.HEADER_BYTES))
    with pytest.raises(DecryptionError) as caught:
        envelope.open_stream(src, io.BytesIO(), header=header, subject_key=envelope.new_key(),
                             context=CONTEXT)
    assert "does not unwrap" in str(caught.value)


def test_sealed_size_clamps_a_negative_size_to_the_empty_object() -> None:
    empty = envelope.HEADER_BYTES + 12 + 16
    assert envelope.sealed_size(0, CHUNK) == empty
    assert envelope.sealed_size(-1, CHUNK) == empty
    assert envelope.sealed_size(200_000) == envelope.HEADER_BYTES + 200_000 + 4 * (12 + 16)


@pytest.mark.parametrize("chunk", [0, -1, 16 * 1024 * 1024 + 1])
def test_a_chunk_size_outside_1_to_16_mib_is_refused_by_both_seals(chunk: int) -> None:
    sentence = "chunk_size must be between 1 and 16777216"
    with pytest.raises(ValueError, match=sentence):
        envelope.seal(b"x", key_id=KEY_ID, subject_key=KEY, context=CONTEXT, chunk_size=chunk)
    with pytest.raises(ValueError, match=sentence):
        envelope.seal_stream(io.BytesIO(b"x"), io.BytesIO(), 1, key_id=KEY_ID, subject_key=KEY,
                             context=CONTEXT, chunk_size=chunk)


@pytest.mark.parametrize("chunk", [1, 16 * 1024 * 1024])
def test_the_chunk_sizes_at_both_ends_seal_and_open(chunk: int) -> None:
    blob = envelope.seal(b"ab", key_id=KEY_ID, subject_key=KEY, context=CONTEXT, chunk_size=chunk)
    assert envelope.read_header(blob).chunk_size == chunk
    assert envelope.open_sealed(blob, subject_key=KEY, context=CONTEXT) == b"ab"
    out = io.BytesIO()
    envelope.seal_stream(io.BytesIO(b"ab"), out, 2, key_id=KEY_ID, subject_key=KEY,
                         context=CONTEXT, chunk_size=chunk)
    assert _open_stream(out.getvalue()) == b"ab"


def test_the_header_carries_the_documented_magic_version_and_flags() -> None:
    blob = _seal_stream(b"layout")
    assert (blob[:4], blob[4], blob[5], envelope.HEADER_BYTES) == (b"MPE\x1e", 1, 0, 76)
    edited = blob[:4] + bytes([2]) + blob[5:]
    with pytest.raises(DecryptionError, match="unknown encryption format version 2"):
        envelope.read_header(edited)


def test_a_header_with_chunk_size_zero_is_refused_as_damaged_and_headers_are_frozen() -> None:
    blob = _seal_stream(b"zero")
    at = 4 + 1 + 1 + 16 + 40  # the chunk size field
    edited = blob[:at] + bytes(4) + blob[at + 4:]
    with pytest.raises(DecryptionError, match="the object's header is damaged"):
        envelope.read_header(edited)
    header = envelope.read_header(blob)
    with pytest.raises(AttributeError):
        header.chunk_size = 1  # type: ignore[misc]
