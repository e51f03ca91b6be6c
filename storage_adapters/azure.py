"""Azure Blob Storage (azure-storage-blob).

The adapter's connection (settings, credentials, the clients, request counting) is
storage_adapters/azure_connection, what SDK errors mean storage_adapters/azure_errors, its
listings and bulk deletes storage_adapters/azure_listing, its bounded reads
storage_adapters/azure_reads. Backend facts the object calls here rely on:

- Puts are create-only and carry an MD5: ``upload_blob(data, overwrite=False,
  validate_content=True)`` sends a transactional Content-MD5 the service checks, and the MD5
  is stored with the blob; an existing blob answers 409 BlobAlreadyExists → ObjectExists.
- Gets are read bounded (at most ``max_bytes``, within the call deadline:
  storage_adapters/azure_reads) and recompute the MD5 of the whole body to compare it with
  the stored Content-MD5; a mismatch raises IntegrityError. A blob rewritten out of band
  gets a new stored MD5 and reads back without complaint — the service's own SHA-256 is the
  final guard.
- Soft-deleted blobs stay restorable until the account's delete retention ends unless
  permanent delete is enabled; ``describe()`` reports the window.
- A storage class is an access tier set in place (``set_standard_blob_tier``; the blob is
  not rewritten, its bytes and MD5 stay). Hot, Cool and Cold read back at once; the Archive
  tier needs hours of rehydration, so it is not offered.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
)
from azure.storage.blob import BlobBlock, BlobClient, ContentSettings

from . import azure_reads
from .azure_listing import AzureListing
from .base import (
    BucketDescription,
    HealthReport,
    IntegrityError,
    ObjectExists,
    ObjectInfo,
    holds_exactly,
    read_block,
    rechunk,
    timed_probe,
)
from .bounded import Deadline, check_announced
from .deadlines import bounded_calls

log = logging.getLogger(__name__)


@bounded_calls("_delete_batch")  # each call within call_deadline (storage_adapters/deadlines)
class AzureAdapter(AzureListing):
    def put(self, path: str, data: bytes) -> None:
        key = self._key(path)
        md5 = hashlib.md5(data, usedforsecurity=False).digest()
        self._op("put")
        try:
            self._container.upload_blob(
                key, data, overwrite=False, validate_content=True,
                content_settings=ContentSettings(content_type="application/octet-stream",
                                                 content_md5=bytearray(md5)))
        except ResourceExistsError:
            if holds_exactly(self, path, data):
                return  # a retry found its own first attempt, whose answer was lost
            raise ObjectExists(path) from None
        except AzureError as exc:
            self._raise(exc, path)

    def put_file(self, path: str, file: BinaryIO) -> None:
        """Like ``put`` for the rest of ``file``, holding one block in memory at a time.

        Below ``part_size`` it is one ``put``. Otherwise a block blob: blocks of
        ``part_size`` staged with a transactional MD5 each (the service checks it), under ids
        unique to this upload, then one create-only commit of the list (``If-None-Match:
        *``, an existing blob → ObjectExists) that stores the MD5 of the whole, computed
        while sending, for reads to check. Until the commit nothing is visible; a failed
        upload's staged blocks are discarded (see :meth:`_discard_blocks`).
        """
        key = self._key(path)
        piece = read_block(file, self.part_size)
        if len(piece) < self.part_size:
            self.put(path, piece)
            return
        blob = self._container.get_blob_client(key)
        self._op("head")
        try:
            if blob.exists():  # refused before a byte is sent; the commit is the real guard
                raise ObjectExists(path)
        except AzureError as exc:
            self._raise(exc, path)
        upload = uuid.uuid4().hex
        md5 = hashlib.md5(usedforsecurity=False)
        blocks: list[BlobBlock] = []
        try:
            while piece:
                block_id = base64.b64encode(f"{upload}-{len(blocks):08d}".encode()).decode()
                self._op("put_block")
                blob.stage_block(block_id, piece, length=len(piece), validate_content=True)
                md5.update(piece)
                blocks.append(BlobBlock(block_id=block_id))
                piece = read_block(file, self.part_size)
            self._op("put_commit")
            blob.commit_block_list(
                blocks, content_settings=ContentSettings(
                    content_type="application/octet-stream",
                    content_md5=bytearray(md5.digest())),
                match_condition=MatchConditions.IfMissing)
        except BaseException as exc:
            exists = isinstance(exc, ResourceExistsError | ResourceModifiedError)
            if not exists:
                self._discard_blocks(blob)
            if exists:
                raise ObjectExists(path) from None
            if isinstance(exc, AzureError):
                self._raise(exc, path)
            raise

    def _discard_blocks(self, blob: BlobClient) -> None:
        """Drop the blocks a failed upload staged. Azure has no call to delete uncommitted
        blocks (it collects them after a week); committing an empty list discards them, so
        where no blob exists an empty one is committed (create-only) and deleted at once by
        its ETag. Where the blob exists (someone else's), its next commit discards them."""
        self._op("put_abort")
        try:
            done = blob.commit_block_list([], match_condition=MatchConditions.IfMissing)
            blob.delete_blob(etag=str(done["etag"]), match_condition=MatchConditions.IfNotModified)
        except (ResourceExistsError, ResourceModifiedError):
            pass
        except AzureError as exc:
            log.warning("could not discard the staged blocks of a failed upload in %s: %s",
                        self._where(""), type(exc).__name__)

    def iter_chunks(self, path: str, chunk_size: int = 1 << 20, max_bytes: int | None = None
                    ) -> Iterator[bytes]:
        """The blob in chunks of ``chunk_size`` (ObjectTooLarge past ``max_bytes``), fetched
        in bounded ranged requests of ``part_size`` pinned to the ETag first looked at (an
        overwrite meanwhile is an error, never a mix of two blobs); the MD5 of all of it is
        checked against the stored Content-MD5 after the last chunk (IntegrityError)."""
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self._op("head")
        try:
            props = self._container.get_blob_client(self._key(path)).get_blob_properties()
        except AzureError as exc:
            self._raise(exc, path)
        total, step = int(props.size), max(self.part_size, chunk_size)
        check_announced(total, max_bytes, self._where(path))
        md5, etag = hashlib.md5(usedforsecurity=False), str(props.etag)
        spans = ((start, min(start + step, total) - 1) for start in range(0, total, step))
        for piece in rechunk((self._download(path, span, etag)[0] for span in spans),
                             chunk_size):
            md5.update(piece)
            yield piece
        self._check_md5(path, props.content_settings.content_md5, md5.digest())

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        data, headers = self._download(path, None, None, max_bytes)
        stored = headers.get("Content-MD5")
        self._check_md5(path, stored and base64.b64decode(stored),
                        hashlib.md5(data, usedforsecurity=False).digest())
        return data

    def _check_md5(self, path: str, stored: Any, actual: bytes) -> None:
        if stored and bytes(stored) != actual:
            raise IntegrityError(f"{self._where(path)}: body does not match its stored MD5 "
                                 f"{base64.b64encode(bytes(stored)).decode()}")

    def _download(self, path: str, span: tuple[int, int] | None, etag: str | None,
                  max_bytes: int | None = None) -> tuple[bytes, Any]:
        """One bounded GET within the call deadline (storage_adapters/azure_reads)."""
        self._op("get")
        try:
            return azure_reads.download(
                self._container.get_blob_client(self._key(path)), where=self._where(path),
                deadline=Deadline(self.call_deadline), read_timeout=self._read_timeout,
                max_bytes=max_bytes if span is None else span[1] - span[0] + 1,
                byte_range=span, etag=etag)
        except AzureError as exc:
            self._raise(exc, path)

    def head(self, path: str) -> ObjectInfo:
        self._op("head")
        try:
            props = self._container.get_blob_client(self._key(path)).get_blob_properties()
        except AzureError as exc:
            self._raise(exc, path)
        return ObjectInfo(path, int(props.size), props.last_modified,
                          _tier(props.blob_tier) or self.storage_classes.standard)

    def storage_class_name(self, storage_class: str) -> str:
        return self.storage_classes.native(storage_class)

    def set_storage_class(self, path: str, storage_class: str) -> str:
        native = self.storage_class_name(storage_class)
        if self.head(path).storage_class == native:
            return native
        self._op("set_tier")
        try:
            self._container.get_blob_client(self._key(path)).set_standard_blob_tier(native)
        except AzureError as exc:
            self._raise(exc, path)
        return native

    def describe(self) -> BucketDescription:
        notes = ["blob versioning is an account setting not readable through the data plane"]
        soft_delete_days: float | None = None
        object_lock = False
        self._op("describe")
        try:
            props = self._container.get_container_properties()
            object_lock = bool(props.immutable_storage_with_versioning_enabled
                               or props.has_immutability_policy or props.has_legal_hold)
        except AzureError as exc:
            self._raise(exc, "")
        try:
            policy = self._service.get_service_properties()["delete_retention_policy"]
            if policy.enabled:
                soft_delete_days = float(policy.days or 0)
                notes.append("soft-deleted blobs stay restorable until the retention ends")
        except HttpResponseError as exc:
            notes.append(f"blob soft delete not readable: HTTP {exc.status_code}")
        return BucketDescription(
            backend="azure", bucket=self.container, region=None, versioning=False,
            soft_delete_days=soft_delete_days, object_lock=object_lock, notes=tuple(notes))

    def health_check(self) -> HealthReport:
        return timed_probe(self, f"health/{uuid.uuid4().hex}")


def _tier(tier: Any) -> str | None:
    """The SDK gives an access tier as a string or a StandardBlobTier enum."""
    value = getattr(tier, "value", tier)
    return str(value) if value else None

