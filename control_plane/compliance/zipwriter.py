"""A ZIP archive written front to back, for exports.

Each member's CRC-32 and sizes are known before its bytes are written: the members are
deflated beforehand (:func:`pack`, side by side in worker threads), so the archive is never
sought back into and its size and SHA-256 are counted as it is written. ``zipfile`` can do
neither: it compresses each member in the writing thread, one after another, and seeks
back to fill in each local header.

The format is APPNOTE 6.3.10's: names in UTF-8 (general purpose bit 11), ZIP64 records
(§4.3.14, §4.3.15, §4.5.3) wherever a size, an offset or the member count passes the
classic limits. Deflate and CRC-32 are ISA-L's (``isal``): level 1 compresses JSON text
about as well as zlib's level 1 at several times its speed.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from isal import isal_zlib

STORED = 0
DEFLATED = 8
LEVEL = 1
# Content that deflate does not shrink by a tenth (already compressed or encrypted) is
# stored: judged on its first 64 KiB, so such content costs no deflate of the rest.
_SAMPLE = 64 << 10
_WORTH = 0.9

_CLASSIC_MAX = 0xFFFFFFFF
_COUNT_MAX = 0xFFFF
_UTF8 = 1 << 11
_VERSION = 45  # 4.5: ZIP64
_MADE_BY = (3 << 8) | _VERSION  # Unix, so the external attributes are a file mode
_FILE_MODE = 0o100644 << 16


@dataclass(frozen=True)
class Packed:
    """A member's bytes as the archive holds them, and what its headers say of them."""

    method: int
    crc: int
    size: int  # uncompressed
    data: bytes | memoryview


def deflate(data: bytes | memoryview) -> bytes:
    """Raw deflate (no zlib header), as a ZIP member holds it."""
    packer = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def pack(data: bytes) -> Packed:
    """``data`` as a member: deflated, or stored when deflate would not make it a tenth
    smaller. Pure CPU outside the GIL (ISA-L), so threads pack side by side."""
    crc = isal_zlib.crc32(data)
    view = memoryview(data)
    if len(data) > _SAMPLE:
        # The first 64 KiB deflated and flushed to a byte boundary: what they take says
        # whether the rest is worth deflating, and the same stream goes on from there.
        packer = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, -15)
        head = packer.compress(view[:_SAMPLE]) + packer.flush(isal_zlib.Z_SYNC_FLUSH)
        if len(head) > _WORTH * _SAMPLE:
            return Packed(STORED, crc, len(data), data)
        packed = head + packer.compress(view[_SAMPLE:]) + packer.flush()
    else:
        packed = deflate(view)
    if len(packed) > _WORTH * len(data):
        return Packed(STORED, crc, len(data), data)
    return Packed(DEFLATED, crc, len(data), packed)


class Deflater:
    """A member packed a piece at a time (one too large to hold, such as the manifest):
    the deflated bytes go to ``out``; :meth:`finish` says what the headers need."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._packer = isal_zlib.compressobj(LEVEL, isal_zlib.DEFLATED, -15)
        self._crc = 0
        self._size = 0
        self._written = 0

    def write(self, data: bytes) -> None:
        self._crc = isal_zlib.crc32(data, self._crc)
        self._size += len(data)
        self._emit(self._packer.compress(data))

    def finish(self) -> tuple[int, int, int]:
        """(crc, uncompressed size, compressed size)."""
        self._emit(self._packer.flush())
        return self._crc, self._size, self._written

    def _emit(self, data: bytes) -> None:
        self._out.write(data)
        self._written += len(data)


@dataclass(frozen=True)
class _Entry:
    name: bytes
    method: int
    crc: int
    size: int
    compressed: int
    offset: int


class ZipWriter:
    """Members appended to ``sink`` one after another; :meth:`close` writes the central
    directory and answers the archive's size and SHA-256."""

    def __init__(self, sink: IO[bytes], modified: datetime) -> None:
        self._sink = sink
        self._digest = hashlib.sha256()
        self._offset = 0
        self._entries: list[_Entry] = []
        self._names: set[bytes] = set()
        self._time = (modified.hour << 11) | (modified.minute << 5) | (modified.second // 2)
        self._date = ((max(modified.year, 1980) - 1980) << 9) | (modified.month << 5) \
            | modified.day

    def add(self, name: str, member: Packed) -> None:
        """A member packed beforehand (:func:`pack`)."""
        self._begin(name, member.method, member.crc, member.size, len(member.data))
        self._write(member.data)

    def add_bytes(self, name: str, data: bytes) -> None:
        self.add(name, pack(data))

    def add_packed_file(self, name: str, file: IO[bytes], crc: int, size: int,
                        compressed: int, chunk: int = 1 << 20) -> None:
        """A deflated member read from ``file`` (a :class:`Deflater`'s output, rewound)."""
        self._begin(name, DEFLATED, crc, size, compressed)
        left = compressed
        while left:
            piece = file.read(min(chunk, left))
            if not piece:
                raise ValueError(f"the member {name!r} ended {left} bytes early")
            self._write(piece)
            left -= len(piece)

    def close(self) -> tuple[int, str]:
        """Write the central directory and the end records; (archive size, SHA-256)."""
        start = self._offset
        for entry in self._entries:
            self._write(self._central(entry))
        directory = self._offset - start
        count = len(self._entries)
        if count >= _COUNT_MAX or start >= _CLASSIC_MAX or directory >= _CLASSIC_MAX:
            end64 = self._offset
            self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, _MADE_BY, _VERSION, 0, 0,
                                    count, count, directory, start))
            self._write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
        self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, _COUNT_MAX),
                                min(count, _COUNT_MAX), min(directory, _CLASSIC_MAX),
                                min(start, _CLASSIC_MAX), 0))
        return self._offset, self._digest.hexdigest()

    def _begin(self, name: str, method: int, crc: int, size: int, compressed: int) -> None:
        encoded = name.encode()
        if encoded in self._names:
            raise ValueError(f"the archive already has a member {name!r}")
        self._names.add(encoded)
        self._entries.append(_Entry(encoded, method, crc, size, compressed, self._offset))
        big = size >= _CLASSIC_MAX or compressed >= _CLASSIC_MAX
        extra = struct.pack("<HHQQ", 1, 16, size, compressed) if big else b""
        self._write(struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, _VERSION, _UTF8, method, self._time, self._date, crc,
            _CLASSIC_MAX if big else compressed, _CLASSIC_MAX if big else size,
            len(encoded), len(extra)) + encoded + extra)

    def _central(self, entry: _Entry) -> bytes:
        # ZIP64 extra: only the fields that overflow, in this order (§4.5.3)
        wide = [value for value in (entry.size, entry.compressed, entry.offset)
                if value >= _CLASSIC_MAX]
        extra = struct.pack(f"<HH{len(wide)}Q", 1, 8 * len(wide), *wide) if wide else b""
        return struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, _MADE_BY, _VERSION, _UTF8, entry.method,
            self._time, self._date, entry.crc, min(entry.compressed, _CLASSIC_MAX),
            min(entry.size, _CLASSIC_MAX), len(entry.name), len(extra), 0, 0, 0, _FILE_MODE,
            min(entry.offset, _CLASSIC_MAX)) + entry.name + extra

    def _write(self, data: bytes | memoryview) -> None:
        self._sink.write(data)
        self._digest.update(data)
        self._offset += len(data)
