"""A sealed object written today must open in every later release: a blob sealed by this
format (version 1) is pinned here byte for byte, with its subject key and context, and must
open to its plaintext; a change to the chunks' associated data (their index or last-chunk
flag) or to the header's layout fails it. A fresh seal's header is pinned too."""

from __future__ import annotations

import uuid

import pytest

from storage_adapters import envelope

KEY_ID = uuid.UUID("00000000-0000-4000-8000-0000000000e1")
SUBJECT_KEY = bytes([0x11]) * 32
CONTEXT = b"tenant/path/v1"
PLAINTEXT = b"memplane sealed object, three chunks"  # 36 bytes: chunks of 16, 16 and 4
PINNED = bytes.fromhex(
    "4d50451e0100000000000000400080000000000000e1de8fd4223342ab7c69c24d80a7eac368e392c847e54e"
    "2a1beefae4e0e6d8d07e9c862308558c93570000001000000000000000240000680c09491b698a83161d306f"
    "6fb4923655e2970996964ba82d3d233df2b55bb1408a2d3480b4f858c513974065a72552e976b907b07109a3"
    "d2613ed47f467ba730037590fe6c4c4c0beae65f72d3430dcebcfd7fdf93c2eecfe52dee51d3498e474f2c6a"
    "cfbd6c47c4d2f6065399f97bf96563436d5fa874")


def test_a_blob_sealed_by_format_version_1_opens_to_its_plaintext() -> None:
    assert envelope.open_sealed(PINNED, subject_key=SUBJECT_KEY, context=CONTEXT) == PLAINTEXT


def test_the_pinned_blob_refuses_another_context() -> None:
    with pytest.raises(envelope.DecryptionError):
        envelope.open_sealed(PINNED, subject_key=SUBJECT_KEY, context=b"tenant/path/v2")


def test_a_fresh_seal_writes_the_same_header_layout() -> None:
    blob = envelope.seal(PLAINTEXT, key_id=KEY_ID, subject_key=SUBJECT_KEY, context=CONTEXT,
                         chunk_size=16)
    # magic, format version 1, a reserved zero byte, the key id; then the wrapped data key
    # (fresh each time), the chunk size and the plaintext size, and two zero bytes.
    assert blob[:22] == PINNED[:22] == b"MPE\x1e\x01\x00" + KEY_ID.bytes
    sizes = (16).to_bytes(4, "big") + (36).to_bytes(8, "big") + b"\0\0"
    assert blob[62:76] == PINNED[62:76] == sizes
    assert len(blob) == len(PINNED) == envelope.sealed_size(36, 16)
