"""Google Cloud Storage (google-cloud-storage).

The adapter's connection (settings, credentials, one client per thread, request counting)
is storage_adapters/gcs_connection, what client errors mean storage_adapters/gcs_errors,
its listings and bulk deletes storage_adapters/gcs_listing, its bounded reads
storage_adapters/gcs_reads. Backend facts the object calls here rely on:

- Puts are create-only and carry a CRC32C: ``upload_from_string(..., if_generation_match=0,
  checksum='crc32c')``; an existing object answers 412 → ObjectExists. The server rejects
  bytes that do not match the CRC32C sent with them.
- Gets are read bounded (at most ``max_bytes``, within the call deadline:
  storage_adapters/gcs_reads) and recompute the CRC32C against the stored one; a mismatch
  raises IntegrityError. An object rewritten out of band carries a new CRC32C and reads back
  without complaint — the service's own SHA-256 of the plaintext is the final guard.
- Soft delete (on by default, 7 days) keeps deleted objects restorable until the retention
  ends; ``describe()`` reports that window.
- A storage class is changed by rewriting the object onto itself
  (``blob.update_storage_class``, same bytes and CRC32C), only if its generation is still the
  one just looked at; the generation it replaced is then deleted, so a versioned bucket keeps
  one (with soft delete on, GCS keeps that generation restorable until the soft delete ends,
  as for any overwrite). Every GCS class reads back at once.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c
from google.api_core import exceptions as gexc

from . import gcs_reads
from .base import (
    BucketDescription,
    HealthReport,
    IntegrityError,
    ObjectExists,
    ObjectInfo,
    StorageError,
    holds_exactly,
    read_block,
    rechunk,
    timed_probe,
)
from .bounded import Deadline, check_announced
from .deadlines import bounded_calls
from .gcs_listing import GCSListing

_RESUMABLE_UNIT = 256 << 10  # a resumable upload's chunks are multiples of 256 KiB


@bounded_calls("_delete_one", "_delete_batch", "_bucket_exists")  # storage_adapters/deadlines
class GCSAdapter(GCSListing):
    def put(self, path: str, data: bytes) -> None:
        blob = self._blob("put", self._key(path))
        try:
            blob.upload_from_string(
                data, content_type="application/octet-stream", if_generation_match=0,
                checksum="crc32c", retry=self._retry, timeout=self._timeout)
        except gexc.PreconditionFailed:
            if holds_exactly(self, path, data):
                return  # a retry found its own first attempt, whose answer was lost
            raise ObjectExists(path) from None
        except Exception as exc:
            self._raise(exc, path)

    def put_file(self, path: str, file: BinaryIO) -> None:
        """Like ``put`` for the rest of ``file``, holding one chunk in memory at a time.

        Below ``part_size`` it is one ``put``. Otherwise a resumable upload in chunks of
        ``part_size`` (rounded to 256 KiB), create-only (``if_generation_match=0``: the
        object appears at finalisation, 412 → ObjectExists), its CRC32C computed while
        sending and checked against the one GCS stored. An upload that fails is never
        finalised, so no object appears (GCS drops the session after a week).
        """
        key = self._key(path)
        size = max(_RESUMABLE_UNIT, self.part_size // _RESUMABLE_UNIT * _RESUMABLE_UNIT)
        start = file.tell() if _seekable(file) else None
        first = read_block(file, size)
        if len(first) < size:
            self.put(path, first)
            return
        # A seekable file is sent from where it was (the library rewinds a chunk it must
        # resend); otherwise what was read is sent first, then the rest.
        if start is not None:
            file.seek(start)
            first = b""
        stream = _Source(first, file, seekable=start is not None)
        del first
        blob = self._client("put").bucket(self.bucket).blob(key, chunk_size=size)
        try:  # refused before a byte is sent; the finalisation's precondition is the guard
            if blob.exists(retry=self._retry, timeout=self._timeout):
                raise ObjectExists(path)
        except ObjectExists:
            raise
        except Exception as exc:
            self._raise(exc, path)
        try:
            blob.upload_from_file(
                stream, content_type="application/octet-stream",
                if_generation_match=0, checksum="crc32c", retry=self._retry,
                timeout=self._timeout)
        except gexc.PreconditionFailed:
            raise ObjectExists(path) from None
        except Exception as exc:
            if stream.failed is not None:  # the file failed, not the store: its own error
                raise stream.failed from None
            self._raise(exc, path)

    def iter_chunks(self, path: str, chunk_size: int = 1 << 20, max_bytes: int | None = None
                    ) -> Iterator[bytes]:
        """The object in chunks of ``chunk_size``, fetched in ranged requests of
        ``part_size`` (each bounded, within the call deadline: storage_adapters/gcs_reads)
        pinned to the generation first looked at (an overwrite meanwhile is an error, never a
        mix of two objects); the CRC32C of all of it is checked against the stored one after
        the last chunk (IntegrityError). Larger than ``max_bytes``: ObjectTooLarge."""
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        key = self._key(path)
        blob = self._blob("get", key)
        try:
            blob.reload(retry=self._retry, timeout=self._timeout)
        except Exception as exc:
            self._raise(exc, path)
        total, expected = int(blob.size or 0), blob.crc32c
        check_announced(total, max_bytes, f"gs://{self.bucket}/{key}")
        crc = google_crc32c.Checksum()
        for piece in rechunk(gcs_reads.pieces(
                lambda span: self._download(path, span[1] - span[0] + 1, span,
                                            blob.generation),
                total, max(self.part_size, chunk_size)), chunk_size):
            crc.update(piece)
            yield piece
        if expected and base64.b64encode(crc.digest()).decode() != expected:
            raise IntegrityError(f"gs://{self.bucket}/{key}: CRC32C mismatch on download")

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        return self._download(path, max_bytes)

    def _download(self, path: str, max_bytes: int | None, span: tuple[int, int] | None = None,
                  generation: int | None = None) -> bytes:
        key = self._key(path)
        self._client("get")
        try:
            return gcs_reads.download(
                self._local.session, gcs_reads.media_url(self.endpoint, self.bucket, key,
                                                         generation),
                max_bytes=max_bytes, deadline=Deadline(self.call_deadline),
                where=f"gs://{self.bucket}/{key}", timeout=self._timeout,
                attempts=self._attempts, byte_range=span, check_crc=span is None)
        except Exception as exc:
            self._raise(exc, path)

    def head(self, path: str) -> ObjectInfo:
        blob = self._blob("head", self._key(path))
        try:
            blob.reload(retry=self._retry, timeout=self._timeout)
        except Exception as exc:
            self._raise(exc, path)
        return ObjectInfo(path, int(blob.size or 0), blob.updated,
                          blob.storage_class or self.storage_classes.standard)

    def storage_class_name(self, storage_class: str) -> str:
        return self.storage_classes.native(storage_class)

    def set_storage_class(self, path: str, storage_class: str) -> str:
        native = self.storage_class_name(storage_class)
        key = self._key(path)
        blob = self._blob("head", key)
        try:
            blob.reload(retry=self._retry, timeout=self._timeout)
            if (blob.storage_class or self.storage_classes.standard) == native:
                return native
            old = blob.generation
            self._local.kind = "rewrite"
            blob.update_storage_class(native, if_generation_match=old, retry=self._retry,
                                      timeout=self._timeout)
        except gexc.PreconditionFailed:
            raise StorageError(f"gs://{self.bucket}/{key}: the object changed while its "
                               "storage class was being set") from None
        except Exception as exc:
            self._raise(exc, path)
        if old is not None and blob.generation != old and self._keeps_versions():
            self._delete_one((key, old))
        kept = blob.storage_class or self.storage_classes.standard
        if kept != native:  # the rewrite's answer says what the object has now
            raise StorageError(f"gs://{self.bucket}/{key}: the store kept the object in "
                               f"{kept} when asked for {native}")
        return native

    def _keeps_versions(self) -> bool:
        """Whether the bucket keeps noncurrent generations (object versioning), looked up
        once: only then does a rewrite leave the previous generation behind."""
        if self._versioning is None:
            try:
                bucket = self._client("describe").get_bucket(
                    self.bucket, retry=self._retry, timeout=self._timeout)
            except Exception as exc:
                self._raise(exc, "", object_call=False)
            self._versioning = bool(bucket.versioning_enabled)
        return self._versioning

    def describe(self) -> BucketDescription:
        client = self._client("describe")
        try:
            bucket = client.get_bucket(self.bucket, retry=self._retry, timeout=self._timeout)
        except Exception as exc:
            self._raise(exc, "", object_call=False)
        notes: list[str] = []
        seconds = bucket.soft_delete_policy.retention_duration_seconds
        if seconds is None:
            notes.append("no soft delete policy reported")
        retention = bucket.retention_period
        object_lock = bool(bucket.retention_policy_locked) or (
            getattr(bucket, "object_retention_mode", None) == "Enabled")
        if seconds:
            notes.append("soft-deleted objects stay restorable until the soft delete ends")
        return BucketDescription(
            backend="gcs", bucket=self.bucket, region=bucket.location,
            versioning=bool(bucket.versioning_enabled),
            soft_delete_days=None if seconds is None else int(seconds) / 86400,
            object_lock=object_lock,
            retention_days=None if retention is None else int(retention) / 86400,
            notes=tuple(notes),
        )

    def health_check(self) -> HealthReport:
        probe = f"health/{uuid.uuid4().hex}"
        report = timed_probe(self, probe)
        if report.ok and report.description is not None and report.description.versioning:
            self.purge_versions(probe)
        return report


def _seekable(file: BinaryIO) -> bool:
    try:
        return bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        return False


class _Source:
    """The file a resumable upload reads: ``head`` (already read to decide how to upload),
    then the rest of ``file``; a read that fails is remembered (``failed``), so the upload's
    error can be told from the file's."""

    def __init__(self, head: bytes, file: BinaryIO, *, seekable: bool) -> None:
        self._head: bytes | memoryview = head
        self._file = file
        self._seekable = seekable
        self._offset = 0
        self.failed: BaseException | None = None

    def read(self, size: int | None = -1) -> bytes:
        try:
            return self._read(size)
        except Exception as exc:
            self.failed = exc
            raise

    def _read(self, size: int | None) -> bytes:
        if self._head:
            if size is None or size < 0:
                data = bytes(self._head) + self._file.read()
                self._head = b""
            else:
                data = bytes(self._head[:size])
                self._head = memoryview(self._head)[size:]
                if len(data) < size:
                    data += read_block(self._file, size - len(data))
        else:
            data = self._file.read() if size is None or size < 0 else \
                read_block(self._file, size)
        self._offset += len(data)
        return data

    def tell(self) -> int:
        return self._file.tell() if self._seekable else self._offset

    def seek(self, offset: int, whence: int = 0) -> int:
        if not self._seekable:
            raise OSError("the file cannot seek")
        return self._file.seek(offset, whence)

    def seekable(self) -> bool:
        return self._seekable
