"""Amazon S3 and S3-compatible stores (boto3).

The adapter's connection (settings, credentials, the client, request counting) is
storage_adapters/s3_connection, what botocore errors mean storage_adapters/s3_errors, its
listings and bulk deletes storage_adapters/s3_listing, its checked reads
storage_adapters/s3_reads. Backend facts the object calls here rely on:

- Puts are create-only and carry a SHA-256: ``put_object(..., ChecksumAlgorithm='SHA256',
  ChecksumSHA256=<b64>, IfNoneMatch='*')``; an existing key answers 412 → ObjectExists.
- Gets send ``ChecksumMode='ENABLED'``; the body is read bounded (at most ``max_bytes``,
  within the call deadline) and its stored SHA-256 checked (storage_adapters/s3_reads); a
  mismatch raises IntegrityError. An object written without a checksum (not by us) comes
  back unchecked — the service's own SHA-256 of the plaintext is the final guard.
- A storage class is changed by copying the object onto itself with ``StorageClass``
  (``copy_object``, metadata copied, the SHA-256 checksum recomputed by S3 over the same
  bytes), only if the object is still the one just looked at (``CopySourceIfMatch``). In a
  versioned bucket the copy is a new version: the one it was copied from is deleted by its
  VersionId, so the object keeps one version. Only classes that read back at once are
  offered (not GLACIER / DEEP_ARCHIVE, which need a restore first).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from .base import (
    BucketDescription,
    BucketNotFound,
    HealthReport,
    ObjectExists,
    ObjectInfo,
    holds_exactly,
    read_block,
    timed_probe,
)
from .bounded import Deadline
from .deadlines import bounded_calls
from .s3_errors import MISSING_CODES, error_code
from .s3_listing import S3Listing
from .s3_reads import PART_SIZE_META, checked_body, rechunked

log = logging.getLogger(__name__)

MIN_PART_BYTES = 5 << 20  # S3 refuses smaller parts, except the last


@bounded_calls("_delete_objects")  # each call within call_deadline (storage_adapters/deadlines)
class S3Adapter(S3Listing):
    def put(self, path: str, data: bytes) -> None:
        key = self._key(path)
        digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
        try:
            self._client.put_object(
                Bucket=self.bucket, Key=key, Body=data, ChecksumAlgorithm="SHA256",
                ChecksumSHA256=digest, IfNoneMatch="*",
            )
        except ClientError as exc:
            if error_code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                if holds_exactly(self, path, data):
                    return  # a retry found its own first attempt, whose answer was lost
                raise ObjectExists(path) from None
            self._raise(exc, path)
        except BotoCoreError as exc:
            self._raise(exc, path)

    def put_file(self, path: str, file: BinaryIO) -> None:
        """Like ``put`` for the rest of ``file``, holding one part in memory at a time.

        Below ``part_size`` it is one ``put``. Otherwise a multipart upload: each part
        carries its SHA-256, which S3 checks; the completion is create-only
        (``IfNoneMatch='*'``, 412 → ObjectExists), so the object appears whole or not at
        all; any failure aborts the upload, so no parts are left behind (billed, unlisted).
        """
        key = self._key(path)
        size = max(self.part_size, MIN_PART_BYTES)
        piece = read_block(file, size)
        if len(piece) < size:
            self.put(path, piece)
            return
        try:
            self._client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if error_code(exc) not in MISSING_CODES:
                self._raise(exc, path)
        except BotoCoreError as exc:
            self._raise(exc, path)
        else:  # refused before a byte is sent; the completion below is the real guard
            raise ObjectExists(path)
        try:
            upload_id = self._client.create_multipart_upload(
                Bucket=self.bucket, Key=key, ChecksumAlgorithm="SHA256",
                Metadata={PART_SIZE_META: str(size)})["UploadId"]
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, path)
        try:
            parts: list[dict[str, Any]] = []
            while piece:
                digest = base64.b64encode(hashlib.sha256(piece).digest()).decode()
                answer = self._client.upload_part(
                    Bucket=self.bucket, Key=key, UploadId=upload_id,
                    PartNumber=len(parts) + 1, Body=piece, ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=digest)
                parts.append({"PartNumber": len(parts) + 1, "ETag": answer["ETag"],
                              "ChecksumSHA256": digest})
                piece = read_block(file, size)
            self._client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": parts}, IfNoneMatch="*")
        except BaseException as exc:
            self._abort(key, upload_id)
            if isinstance(exc, ClientError) and error_code(exc) in (
                    "PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise ObjectExists(path) from None
            if isinstance(exc, ClientError | BotoCoreError):
                self._raise(exc, path)
            raise

    def _abort(self, key: str, upload_id: str) -> None:
        """Abort a multipart upload (its parts are deleted); an upload S3 no longer knows
        is already gone."""
        try:
            self._client.abort_multipart_upload(Bucket=self.bucket, Key=key,
                                                UploadId=upload_id)
        except ClientError as exc:
            if error_code(exc) != "NoSuchUpload":
                log.warning("could not abort a multipart upload in s3://%s: %s",
                            self.bucket, error_code(exc))
        except BotoCoreError as exc:
            log.warning("could not abort a multipart upload in s3://%s: %s", self.bucket,
                        type(exc).__name__)

    def iter_chunks(self, path: str, chunk_size: int = 1 << 20, max_bytes: int | None = None
                    ) -> Iterator[bytes]:
        """The object in chunks of ``chunk_size`` from one streamed GET, at most
        ``max_bytes`` of it, each part (``part_size``) within the call deadline; its SHA-256
        checked after the last chunk (storage_adapters/s3_reads)."""
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        yield from rechunked(self._read(path, max_bytes, self.part_size), chunk_size)

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        return b"".join(self._read(path, max_bytes))

    def _read(self, path: str, max_bytes: int | None, progress_bytes: int | None = None
              ) -> Iterator[bytes]:
        key = self._key(path)
        deadline = Deadline(self.call_deadline)
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key,
                                               ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, path)
        yield from checked_body(response, max_bytes=max_bytes, deadline=deadline,
                                where=f"s3://{self.bucket}/{key}",
                                progress_bytes=progress_bytes)

    def head(self, path: str) -> ObjectInfo:
        try:
            response = self._client.head_object(Bucket=self.bucket, Key=self._key(path))
        except ClientError as exc:
            # A HEAD 404 has no body to say whether the key or the bucket is missing.
            if error_code(exc) in MISSING_CODES and not self._bucket_exists():
                raise BucketNotFound(f"bucket {self.bucket!r} does not exist") from exc
            self._raise(exc, path)
        except BotoCoreError as exc:
            self._raise(exc, path)
        return ObjectInfo(path, int(response["ContentLength"]), response.get("LastModified"),
                          response.get("StorageClass") or self.storage_classes.standard)

    def storage_class_name(self, storage_class: str) -> str:
        return self.storage_classes.native(storage_class)

    def set_storage_class(self, path: str, storage_class: str) -> str:
        native = self.storage_class_name(storage_class)
        key = self._key(path)
        try:
            found = self._client.head_object(Bucket=self.bucket, Key=key)
            if (found.get("StorageClass") or self.storage_classes.standard) == native:
                return native
            copied = self._client.copy_object(
                Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": key},
                CopySourceIfMatch=found["ETag"], StorageClass=native, MetadataDirective="COPY",
                ChecksumAlgorithm="SHA256")
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, path)
        old, new = copied.get("CopySourceVersionId"), copied.get("VersionId")
        if old and new and old != new:
            self._delete_objects([{"Key": key, "VersionId": old}])
        return native

    def describe(self) -> BucketDescription:
        notes: list[str] = []
        versioning = object_lock = False
        retention_days: float | None = None
        region: str | None = None
        try:
            status = self._client.get_bucket_versioning(Bucket=self.bucket).get("Status")
            versioning = status == "Enabled"
            if status == "Suspended":
                notes.append("versioning suspended: earlier versions are still kept")
            location = self._client.get_bucket_location(Bucket=self.bucket)
            region = location.get("LocationConstraint") or "us-east-1"
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, "")
        try:
            lock = self._client.get_object_lock_configuration(Bucket=self.bucket)
            config = lock.get("ObjectLockConfiguration", {})
            object_lock = config.get("ObjectLockEnabled") == "Enabled"
            default = config.get("Rule", {}).get("DefaultRetention", {})
            if "Days" in default:
                retention_days = float(default["Days"])
            elif "Years" in default:
                retention_days = float(default["Years"]) * 365
        except ClientError as exc:
            if error_code(exc) != "ObjectLockConfigurationNotFoundError":
                notes.append(f"object lock not readable: {error_code(exc)}")
        except BotoCoreError as exc:
            self._raise(exc, "")
        notes.append("S3 has no soft delete; with versioning a delete leaves the old version")
        return BucketDescription(
            backend="s3", bucket=self.bucket, region=region, versioning=versioning,
            soft_delete_days=None, object_lock=object_lock, retention_days=retention_days,
            notes=tuple(notes),
        )

    def health_check(self) -> HealthReport:
        probe = f"health/{uuid.uuid4().hex}"
        report = timed_probe(self, probe)
        if report.ok and report.description is not None and report.description.versioning:
            self.purge_versions(probe)  # a versioned bucket would keep every probe forever
        return report

