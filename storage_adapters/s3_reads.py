"""An S3 GET's body, read bounded (storage_adapters/bounded) and checked against the
SHA-256 S3 stored with the object.

The body is read from urllib3's response under botocore's ``StreamingBody`` a piece at a
time, so botocore's own checksum check (which wraps whole reads) is replaced by the one
here: an object put in one request carries the SHA-256 of its bytes; one put in parts a
checksum of its parts' checksums (``<base64 SHA-256 of the parts' SHA-256s>-<n>``),
recomputed from the part size ``put_file`` recorded in the object's metadata. An object
without either (not written by us) is served unchecked — the service's own SHA-256 of the
plaintext is the final guard.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3.exceptions

from .base import IntegrityError, StorageError, StorageUnavailable, rechunk
from .bounded import Deadline, ObjectTooLarge, bounded_pieces, urllib3_read1

PART_SIZE_META = "memplane-part-size"  # put_file's part size, to check the parts on reads


def checked_body(response: Mapping[str, Any], *, max_bytes: int | None, deadline: Deadline,
                 where: str, progress_bytes: int | None = None) -> Iterator[bytes]:
    """The pieces of ``response``'s body (ObjectTooLarge, DeadlineExceeded as
    ``bounded_pieces``); IntegrityError after the last if they do not match the stored
    SHA-256. The connection is closed when the read stops, early or not."""
    body = response["Body"]
    raw = getattr(body, "_raw_stream", None)  # botocore's StreamingBody over urllib3's
    read1 = urllib3_read1(raw) if hasattr(raw, "read1") else body.read
    check = _Whole.of(response) or Composite.of(response)
    try:
        for piece in bounded_pieces(read1, max_bytes=max_bytes, deadline=deadline,
                                    where=where, announced=response.get("ContentLength"),
                                    progress_bytes=progress_bytes):
            if check is not None:
                check.update(piece)
            yield piece
    except StorageError:
        raise
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise StorageUnavailable(f"{where}: the read broke off ({type(exc).__name__})"
                                 ) from None
    finally:
        body.close()
    if check is not None and not check.matches():
        what = "the parts do not match their" if isinstance(check, Composite) else \
            "the body does not match its"
        raise IntegrityError(f"{where}: {what} SHA-256 checksum {check.stored}")


def rechunked(pieces: Iterator[bytes], chunk_size: int) -> Iterator[bytes]:
    """``rechunk`` of ``checked_body``'s pieces; a checksum mismatch found at the end is
    raised after the last chunk, so every byte came, and then the refusal."""
    mismatch: list[IntegrityError] = []

    def until_checked() -> Iterator[bytes]:
        try:
            yield from pieces
        except ObjectTooLarge:
            raise
        except IntegrityError as exc:
            mismatch.append(exc)

    yield from rechunk(until_checked(), chunk_size)
    if mismatch:
        raise mismatch[0]


class _Whole:
    """The SHA-256 of an object put in one request."""

    def __init__(self, stored: str) -> None:
        self.stored = stored
        self._digest = hashlib.sha256()

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> _Whole | None:
        stored = str(response.get("ChecksumSHA256") or "")
        return cls(stored) if stored and "-" not in stored else None

    def update(self, data: bytes) -> None:
        self._digest.update(data)

    def matches(self) -> bool:
        return base64.b64encode(self._digest.digest()).decode() == self.stored


class Composite:
    """S3's checksum of a multipart object (``<base64 SHA-256 of the parts' SHA-256s>-<n>``),
    recomputed from the streamed bytes and the part size they were uploaded with."""

    def __init__(self, stored: str, part_size: int) -> None:
        self.stored = stored
        self._part_size = part_size
        self._digests: list[bytes] = []
        self._part = hashlib.sha256()
        self._filled = 0

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> Composite | None:
        stored = str(response.get("ChecksumSHA256") or "")
        size = str((response.get("Metadata") or {}).get(PART_SIZE_META, ""))
        if "-" not in stored or not size.isdigit() or int(size) <= 0:
            return None
        return cls(stored, int(size))

    def update(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            take = min(len(view), self._part_size - self._filled)
            self._part.update(view[:take])
            self._filled += take
            view = view[take:]
            if self._filled == self._part_size:
                self._digests.append(self._part.digest())
                self._part, self._filled = hashlib.sha256(), 0

    def matches(self) -> bool:
        digests = self._digests + ([self._part.digest()] if self._filled else [])
        whole = base64.b64encode(hashlib.sha256(b"".join(digests)).digest()).decode()
        return f"{whole}-{len(digests)}" == self.stored
