"""Listing an Azure container's blobs and versions, and deleting them in bulk.

- ``delete_blobs`` takes at most 256 sub-requests per batch (Azurite accepts more; the limit
  is enforced here) and is not atomic: each sub-request is checked, and a missing blob
  (404) counts as deleted.
- Versions and soft-deleted blobs are listed with ``include=['versions', 'deleted']``; an
  emulator without them (Azurite) falls back to a plain listing. ``purge_versions`` deletes
  every version by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from azure.core.exceptions import AzureError

from .azure_connection import AzureConnection
from .base import (
    BucketNotFound,
    ObjectInfo,
    ObjectVersion,
    StorageAuthError,
    StorageError,
    StorageUnavailable,
    check_prefix,
    chunked,
)

DELETE_BATCH_LIMIT = 256
_Names = list[str]


class AzureListing(AzureConnection):
    """The listings and bulk deletes of :class:`storage_adapters.azure.AzureAdapter`."""

    def delete_many(self, paths: Iterable[str]) -> int:
        n = 0
        for batch in chunked(paths, DELETE_BATCH_LIMIT):
            self._delete_batch([self._key(p) for p in batch])
            n += len(batch)
        return n

    def _delete_batch(self, blobs: list[Any]) -> None:
        self._op("delete_batch")
        try:
            parts = list(self._container.delete_blobs(*blobs, raise_on_any_failure=False))
        except AzureError as exc:
            self._raise(exc, str(blobs[0]))
        if any(p.headers.get("x-ms-error-code") == "ContainerNotFound" for p in parts):
            raise BucketNotFound(
                f"container {self.container!r} does not exist at {self.account_url}")
        failed = [p for p in parts if p.status_code not in (200, 202, 404)]
        if failed:
            status = failed[0].status_code
            error_type = StorageAuthError if status in (401, 403) else StorageError
            raise error_type(f"{self._where('')}: {len(failed)} of {len(parts)} deletes in a "
                             f"batch failed, first with HTTP {status}")

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        for blob in self._iter_blobs("list", prefix, include=None):
            yield ObjectInfo(blob.name[len(self.root):], int(blob.size), blob.last_modified)

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        include = ["versions", "deleted"] if self._history_supported else None
        try:
            blobs = self._iter_blobs("list_versions", prefix, include=include)
            first = next(blobs, None)
        except (StorageUnavailable, StorageAuthError):
            raise
        except StorageError:
            if include is None:
                raise
            self._history_supported = False  # an emulator without versions/soft delete
            blobs = self._iter_blobs("list_versions", prefix, include=None)
            first = next(blobs, None)
        if first is None:
            return
        for blob in _chain(first, blobs):
            yield ObjectVersion(
                blob.name[len(self.root):], blob.version_id,
                is_delete_marker=bool(blob.deleted),
                is_latest=bool(blob.is_current_version) or blob.version_id is None,
                size=int(blob.size or 0), last_modified=blob.last_modified)

    def purge_versions(self, prefix: str) -> int:
        n = 0
        # A soft-deleted blob without a version id cannot be removed early; it is skipped.
        refs = ({"name": self.root + v.path, "version_id": v.version_id}
                if v.version_id and not v.is_latest else self.root + v.path
                for v in self.list_versions(prefix) if v.version_id or not v.is_delete_marker)
        for batch in chunked(refs, DELETE_BATCH_LIMIT):  # type: ignore[arg-type]
            self._delete_batch(batch)
            n += len(batch)
        return n

    def _iter_blobs(self, kind: str, prefix: str, *, include: _Names | None) -> Iterator[Any]:
        full = self.root + check_prefix(prefix)
        self._op(kind)
        try:
            for page in self._container.list_blobs(name_starts_with=full,
                                                   include=include).by_page():
                yield from page
                self._op(kind)  # the consumer may have used this thread meanwhile
        except AzureError as exc:
            self._raise(exc, prefix)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
