"""Listing a GCS bucket's objects and generations, and deleting them in bulk.

- Real GCS deletes in ``client.batch()`` chunks of at most 100 (``use_batch``, the default).
  Emulators without a working batch endpoint (fake-gcs-server) use ``use_batch=False``:
  single deletes in a bounded thread pool. Deleting a missing object succeeds.
- With versioning on, a delete without a generation leaves a noncurrent version:
  ``purge_versions`` deletes every generation. Soft delete (on by default, 7 days) keeps
  deleted objects restorable until the retention ends; the API cannot purge them earlier.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from google.api_core import exceptions as gexc
from google.cloud import storage

from .base import BucketNotFound, ObjectInfo, ObjectVersion, check_prefix, chunked
from .gcs_connection import GCSConnection

BATCH_LIMIT = 100
ObjectRefs = list[tuple[str, int | None]]  # (key, generation or None for the live object)


class GCSListing(GCSConnection):
    """The listings and bulk deletes of :class:`storage_adapters.gcs.GCSAdapter`."""

    def delete_many(self, paths: Iterable[str]) -> int:
        keys = ((self._key(p), None) for p in paths)
        return self._delete_all(keys)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        for blob in self._iter_blobs("list", prefix, versions=False):
            yield ObjectInfo(blob.name[len(self.root):], int(blob.size or 0), blob.updated)

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        for blob in self._iter_blobs("list_versions", prefix, versions=True):
            yield ObjectVersion(
                blob.name[len(self.root):], str(blob.generation),
                is_latest=blob.time_deleted is None, size=int(blob.size or 0),
                last_modified=blob.updated)

    def purge_versions(self, prefix: str) -> int:
        return self._delete_all((self.root + v.path, int(v.version_id or 0) or None)
                                for v in self.list_versions(prefix))

    def _iter_blobs(self, kind: str, prefix: str, *, versions: bool) -> Iterator[storage.Blob]:
        full = self.root + check_prefix(prefix)
        try:
            blobs = self._client(kind).list_blobs(
                self.bucket, prefix=full, versions=versions, retry=self._retry,
                timeout=self._timeout)
            for page in blobs.pages:
                yield from page
                self._local.kind = kind  # the consumer may have used this thread meanwhile
        except Exception as exc:
            self._raise(exc, prefix, object_call=False)

    def _delete_all(self, refs: Iterable[tuple[str, int | None]]) -> int:
        """Delete objects (a generation each, or the live one); missing ones are fine.

        GCS answers 404 alike for a missing object and a missing bucket, so the first chunk
        that meets a 404 looks the bucket up, once per call.
        """
        n, bucket_checked = 0, False
        for batch in chunked(refs, BATCH_LIMIT):
            if self.use_batch:
                missing = self._delete_batch(batch)
            else:
                missing = sum(self._pool.map(self._delete_one, batch))
            if missing and not bucket_checked:
                bucket_checked = True
                if not self._bucket_exists():
                    raise BucketNotFound(f"bucket {self.bucket!r} does not exist")
            n += len(batch)
        return n

    def _delete_one(self, ref: tuple[str, int | None]) -> bool:
        """Delete one object; True if it was not there."""
        key, generation = ref
        try:
            self._blob("delete", key, generation).delete(retry=self._retry,
                                                          timeout=self._timeout)
        except gexc.NotFound:
            return True
        except Exception as exc:
            self._raise(exc, key)
        return False

    def _delete_batch(self, refs: ObjectRefs) -> int:
        """Delete up to 100 objects in one batch request; returns how many were missing."""
        client = self._client("delete_batch")
        bucket = client.bucket(self.bucket)
        try:
            with client.batch(raise_exception=False) as batch:
                for key, generation in refs:
                    bucket.blob(key, generation=generation).delete(timeout=self._timeout)
        except Exception as exc:
            self._raise(exc, refs[0][0])
        statuses = [getattr(r, "status_code", 200) for r in getattr(batch, "_responses", [])]
        failed = [status for status in statuses if status >= 400 and status != 404]
        if failed:
            self._raise(gexc.from_http_status(failed[0], "batch delete failed"), refs[0][0])
        return statuses.count(404)
