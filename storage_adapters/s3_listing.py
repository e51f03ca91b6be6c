"""Listing an S3 bucket's objects and versions, and deleting them in bulk.

- ``delete_objects`` takes at most 1000 keys per request (some emulators accept more; the
  limit is enforced here). Deleting a missing key succeeds.
- In a versioned bucket a delete only adds a delete marker: ``purge_versions`` lists every
  version and marker and deletes each by VersionId, 1000 per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from botocore.exceptions import BotoCoreError, ClientError

from .base import ObjectInfo, ObjectVersion, StorageAuthError, StorageError, check_prefix, chunked
from .s3_connection import S3Connection
from .s3_errors import AUTH_CODES

DELETE_BATCH_LIMIT = 1000
_PARALLEL_DELETES = 4


class S3Listing(S3Connection):
    """The listings and bulk deletes of :class:`storage_adapters.s3.S3Adapter`."""

    def delete_many(self, paths: Iterable[str]) -> int:
        """Up to 1,000 keys per request; several requests go out at once (the client is
        thread-safe), since each waits mostly on the store."""
        batches = [[{"Key": self._key(p)} for p in batch]
                   for batch in chunked(paths, DELETE_BATCH_LIMIT)]
        if len(batches) <= 1:
            for keys in batches:
                self._delete_objects(keys)
        else:
            with ThreadPoolExecutor(min(len(batches), _PARALLEL_DELETES)) as pool:
                for done in [pool.submit(self._delete_objects, keys) for keys in batches]:
                    done.result()  # the first failure is raised, after all have finished
        return sum(len(keys) for keys in batches)

    def _delete_objects(self, objects: list[dict[str, str]]) -> None:
        try:
            response = self._client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            )
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, objects[0]["Key"])
        errors = [e for e in response.get("Errors", []) if e.get("Code") != "NoSuchKey"]
        if errors:
            first = errors[0]
            code = first.get("Code", "")
            error_type = StorageAuthError if code in AUTH_CODES else StorageError
            raise error_type(f"s3://{self.bucket}: {len(errors)} deletes failed, first "
                             f"{first.get('Key')!r}: {code} {first.get('Message', '')}")

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        full = self.root + check_prefix(prefix)
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=full)
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    yield ObjectInfo(self._path(item["Key"]), int(item["Size"]),
                                     item.get("LastModified"))
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, prefix)

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        full = self.root + check_prefix(prefix)
        pages = self._client.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket, Prefix=full)
        try:
            for page in pages:
                for item in page.get("Versions", []):
                    yield ObjectVersion(
                        self._path(item["Key"]), item.get("VersionId"),
                        is_latest=bool(item.get("IsLatest")), size=int(item.get("Size", 0)),
                        last_modified=item.get("LastModified"))
                for item in page.get("DeleteMarkers", []):
                    yield ObjectVersion(
                        self._path(item["Key"]), item.get("VersionId"), is_delete_marker=True,
                        is_latest=bool(item.get("IsLatest")),
                        last_modified=item.get("LastModified"))
        except (ClientError, BotoCoreError) as exc:
            self._raise(exc, prefix)

    def delete_versions(self, versions: Iterable[ObjectVersion]) -> int:
        """Permanently delete exactly these versions and markers, 1,000 per request."""
        n = 0
        for batch in chunked(({"Key": self.root + v.path,
                                     "VersionId": v.version_id or "null"} for v in versions),
                                   DELETE_BATCH_LIMIT):
            self._delete_objects(batch)
            n += len(batch)
        return n

    def purge_versions(self, prefix: str) -> int:
        # Versions are deleted page by page while listing continues: the listing resumes
        # from a key/version marker, so removing what was already listed skips nothing.
        n = 0
        batch: list[dict[str, str]] = []
        for version in self.list_versions(prefix):
            batch.append({"Key": self.root + version.path,
                          "VersionId": version.version_id or "null"})
            if len(batch) == DELETE_BATCH_LIMIT:
                self._delete_objects(batch)
                n, batch = n + len(batch), []
        if batch:
            self._delete_objects(batch)
            n += len(batch)
        return n
