"""An export archive sealed while it is uploaded (compliance/export_upload.py), on a real
local bucket: the stored object is the sealed archive, a sealing that fails stores nothing,
and an upload that fails stops the sealing thread."""

from __future__ import annotations

import io
import threading
import uuid
from pathlib import Path
from typing import BinaryIO

import pytest

from control_plane.compliance import export_upload
from storage_adapters import envelope
from storage_adapters.base import ObjectNotFound
from storage_adapters.local import LocalAdapter

KEY = bytes(range(32))
KEY_ID = uuid.UUID(int=7)
CONTEXT = b"tenant/exports/job/export.zip"


def _opened(adapter: LocalAdapter, path: str) -> bytes:
    stored = io.BytesIO(adapter.get(path))
    header = envelope.read_header(stored.read(envelope.HEADER_BYTES))
    assert header.key_id == KEY_ID
    out = io.BytesIO()
    envelope.open_stream(stored, out, header=header, subject_key=KEY, context=CONTEXT)
    return out.getvalue()


def _sealers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memplane-export-seal"]


@pytest.mark.parametrize("size", [0, 1, 65_536, 3 * export_upload.PIECE + 12_345])
def test_the_stored_object_is_the_whole_archive_sealed(tmp_path: Path, size: int) -> None:
    adapter = LocalAdapter(tmp_path)
    plain = bytes(i % 251 for i in range(size))
    export_upload.seal_and_put(adapter, "t/exports/j/export.zip", io.BytesIO(plain), size,
                               key_id=KEY_ID, subject_key=KEY, context=CONTEXT)
    assert _opened(adapter, "t/exports/j/export.zip") == plain
    assert len(adapter.get("t/exports/j/export.zip")) == envelope.sealed_size(size)
    assert _sealers() == []


def test_a_sealing_that_fails_stores_nothing(tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path)
    short = io.BytesIO(b"z" * (2 * export_upload.PIECE))  # the archive said to be longer
    with pytest.raises(ValueError, match="the source ended 1000 bytes early"):
        export_upload.seal_and_put(adapter, "t/exports/j/export.zip", short,
                                   2 * export_upload.PIECE + 1000, key_id=KEY_ID,
                                   subject_key=KEY, context=CONTEXT)
    with pytest.raises(ObjectNotFound):
        adapter.get("t/exports/j/export.zip")
    assert _sealers() == []


class _FailingBucket(LocalAdapter):
    """A bucket whose upload fails after reading its first piece."""

    read = 0

    def put_file(self, path: str, file: BinaryIO) -> None:
        self.read += len(file.read(export_upload.PIECE))
        raise OSError("the bucket went away")


def test_an_upload_that_fails_stops_the_sealing(tmp_path: Path) -> None:
    adapter = _FailingBucket(tmp_path)
    big = io.BytesIO(bytes(64 * export_upload.PIECE))  # far more than the queue holds
    with pytest.raises(OSError, match="the bucket went away"):
        export_upload.seal_and_put(adapter, "t/exports/j/export.zip", big,
                                   64 * export_upload.PIECE, key_id=KEY_ID, subject_key=KEY,
                                   context=CONTEXT)
    assert adapter.read == export_upload.PIECE
    assert _sealers() == []  # joined, not left blocked on the full queue
    assert big.tell() < 64 * export_upload.PIECE  # it stopped before sealing everything
