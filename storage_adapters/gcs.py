"""Google Cloud Storage (google-cloud-storage).

Backend facts this adapter relies on:

- Puts are create-only and carry a CRC32C: ``upload_from_string(..., if_generation_match=0,
  checksum='crc32c')``; an existing object answers 412 → ObjectExists. The server rejects
  bytes that do not match the CRC32C sent with them.
- Gets are read bounded (at most ``max_bytes``, within the call deadline:
  storage_adapters/gcs_reads) and recompute the CRC32C against the stored one; a mismatch
  raises IntegrityError. An object rewritten out of band carries a new CRC32C and reads back
  without complaint — the service's own SHA-256 of the plaintext is the final guard.
- Real GCS deletes in ``client.batch()`` chunks of at most 100 (``use_batch``, the default).
  Emulators without a working batch endpoint (fake-gcs-server) use ``use_batch=False``:
  single deletes in a bounded thread pool. Deleting a missing object succeeds.
- With versioning on, a delete without a generation leaves a noncurrent version:
  ``purge_versions`` deletes every generation. Soft delete (on by default, 7 days) keeps
  deleted objects restorable until the retention ends; the API cannot purge them earlier,
  and ``describe()`` reports that window.
- The requests session under a client is not documented as thread-safe, so each thread
  gets its own client; credentials are shared.
- Credentials: a service account key (``credentials_info``; its ``token_uri`` is replaced by
  Google's own, whatever the key says), ``impersonate_service_account`` (the server's
  identity only mints tokens for that account), or ``anonymous``. ``google.auth.default`` is
  used for the bucket itself only with ``allow_ambient_credentials`` (the operator's default
  bucket); otherwise an adapter without credentials is refused.
- With an ``endpoint_policy`` (storage_adapters/netguard.py) the endpoint is checked when the
  adapter is built and every connection (token requests of a key too) is vetted at connect
  time; proxies from the environment are not used.
- A storage class is changed by rewriting the object onto itself
  (``blob.update_storage_class``, same bytes and CRC32C), only if its generation is still the
  one just looked at; the generation it replaced is then deleted, so a versioned bucket keeps
  one (with soft delete on, GCS keeps that generation restorable until the soft delete ends,
  as for any overwrite). Every GCS class reads back at once.

Every HTTP response is counted in ``stats`` under the operation that caused it.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, NoReturn

import google_crc32c
import requests
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession
from google.auth.transport.requests import Request as GoogleRequest
from google.cloud import storage
from google.cloud.storage.exceptions import DataCorruption, InvalidResponse
from google.cloud.storage.retry import DEFAULT_RETRY

from . import gcs_reads
from .base import (
    STREAM_PART_BYTES,
    BucketDescription,
    BucketNotFound,
    EndpointRefused,
    HealthReport,
    IntegrityError,
    ObjectExists,
    ObjectInfo,
    ObjectNotFound,
    ObjectVersion,
    PermissionDenied,
    RequestStats,
    StorageAuthError,
    StorageClasses,
    StorageError,
    StorageUnavailable,
    check_path,
    check_prefix,
    chunked,
    read_block,
    rechunk,
    timed_probe,
)
from .bounded import DEFAULT_CALL_DEADLINE_SECONDS, Deadline, check_announced
from .deadlines import bounded_calls, requests_adapter, stop_retrying
from .netguard import EndpointNotAllowed, EndpointPolicy, refusal_in

BATCH_LIMIT = 100
_RESUMABLE_UNIT = 256 << 10  # a resumable upload's chunks are multiples of 256 KiB
CLASSES = StorageClasses("STANDARD", "NEARLINE", "COLDLINE",
                         ("STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"))
ObjectRefs = list[tuple[str, int | None]]  # (key, generation or None for the live object)
_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
NO_CREDENTIALS = ("a GCS bucket needs credentials_info (a service account key), "
                  "impersonate_service_account (an account this server may impersonate), or "
                  "anonymous: true (a public bucket); this server does not lend its own Google "
                  "credentials")


@bounded_calls("_delete_one", "_delete_batch", "_bucket_exists")  # storage_adapters/deadlines
class GCSAdapter:
    scheme = "gs"

    def __init__(
        self, bucket: str, *, project: str | None = None, endpoint: str | None = None,
        credentials_info: Mapping[str, Any] | str | None = None, anonymous: bool = False,
        use_batch: bool = True, prefix: str = "", connect_timeout: float = 3.0,
        read_timeout: float = 20.0, max_attempts: int = 2, delete_workers: int = 8,
        impersonate_service_account: str | None = None,
        allow_ambient_credentials: bool = False, endpoint_policy: EndpointPolicy | None = None,
        archive_class: str | None = None, cold_class: str | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE_SECONDS,
    ) -> None:
        if not bucket:
            raise ValueError("a GCS store needs 'bucket'")
        self.call_deadline, self._attempts = call_deadline, max(1, max_attempts)
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        self._versioning: bool | None = None
        if endpoint_policy is not None and endpoint:
            try:
                endpoint_policy.check_endpoint(endpoint)
            except EndpointNotAllowed as exc:
                raise EndpointRefused(str(exc)) from None
        self._policy = endpoint_policy
        self.bucket = bucket
        self.part_size = STREAM_PART_BYTES
        self.root = check_prefix(prefix.strip("/") + "/") if prefix.strip("/") else ""
        self.endpoint = endpoint
        self.use_batch = use_batch
        self.stats = RequestStats()
        self._project = project
        self._timeout = (connect_timeout, read_timeout)
        # The library retries for up to 120 s by time, not by count; a stopped backend must
        # fail within seconds, so each extra attempt buys 1.5 s of retrying.
        self._retry: Retry | None = None
        if max_attempts > 1:
            self._retry = Retry(predicate=DEFAULT_RETRY._predicate, initial=0.2, maximum=1.0,
                                multiplier=2.0, timeout=1.5 * (max_attempts - 1),
                                on_error=stop_retrying)  # not past the call's deadline
        self._credentials = _credentials(credentials_info, anonymous,
                                         impersonate_service_account,
                                         allow_ambient_credentials)
        self._guard_tokens = credentials_info is not None
        self._local = threading.local()
        self._clients: list[storage.Client] = []
        self._clients_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=delete_workers,
                                        thread_name_prefix="gcs-delete")

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> GCSAdapter:
        """``options``: ``allow_ambient_credentials``, ``endpoint_policy`` and
        ``call_deadline``, never taken from ``config`` (which may come from a tenant)."""
        def flag(key: str, default: bool) -> bool:
            value = config.get(key, default)
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true")

        return cls(
            str(config.get("bucket") or ""), project=config.get("project"),
            endpoint=config.get("endpoint"), credentials_info=config.get("credentials_info"),
            anonymous=flag("anonymous", False), use_batch=flag("use_batch", True),
            prefix=str(config.get("prefix") or ""),
            connect_timeout=float(config.get("connect_timeout") or 3.0),
            read_timeout=float(config.get("read_timeout") or 20.0),
            max_attempts=int(config.get("max_attempts") or 2),
            impersonate_service_account=config.get("impersonate_service_account"),
            allow_ambient_credentials=bool(options.get("allow_ambient_credentials")),
            endpoint_policy=options.get("endpoint_policy"),
            archive_class=config.get("archive_class"), cold_class=config.get("cold_class"),
            call_deadline=options.get("call_deadline") or DEFAULT_CALL_DEADLINE_SECONDS,
        )

    # -- clients and request counting -------------------------------------------------

    def _client(self, kind: str) -> storage.Client:
        """This thread's client; responses it receives are counted under ``kind``."""
        self._local.kind = kind
        client: storage.Client | None = getattr(self._local, "client", None)
        if client is None:
            if self._policy is None:
                session = AuthorizedSession(self._credentials)
                pool = requests_adapter(pool_connections=2, pool_maxsize=8)
                session.mount("http://", pool)
                session.mount("https://", pool)
            else:
                # A key's token requests are guarded too; impersonation's go to Google's IAM
                # endpoint with the server's own identity, which the library fixes.
                auth_request = (GoogleRequest(self._policy.requests_session())
                                if self._guard_tokens else None)
                session = self._policy.requests_session(
                    AuthorizedSession(self._credentials, auth_request=auth_request),
                    pool_connections=2, pool_maxsize=8)
            session.hooks["response"].append(self._count)
            self._local.session = session  # the bounded downloads' (storage_adapters/gcs_reads)
            options = {"api_endpoint": self.endpoint} if self.endpoint else None
            client = storage.Client(project=self._project, credentials=self._credentials,
                                    client_options=options, _http=session)
            # The library fetches bucket metadata in background threads to decorate tracing
            # spans: unrequested traffic that would also skew the request counts.
            client._bucket_metadata_cache = None
            self._local.client = client
            with self._clients_lock:
                self._clients.append(client)
        return client

    def _count(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self.stats.add(getattr(self._local, "kind", "other"))

    def _blob(self, kind: str, key: str, generation: int | None = None) -> storage.Blob:
        return self._client(kind).bucket(self.bucket).blob(key, generation=generation)

    def _key(self, path: str) -> str:
        return self.root + check_path(path)

    # -- the protocol -----------------------------------------------------------------

    def put(self, path: str, data: bytes) -> None:
        blob = self._blob("put", self._key(path))
        try:
            blob.upload_from_string(
                data, content_type="application/octet-stream", if_generation_match=0,
                checksum="crc32c", retry=self._retry, timeout=self._timeout)
        except gexc.PreconditionFailed:
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

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    # -- helpers ----------------------------------------------------------------------

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

    def _bucket_exists(self) -> bool:
        """Tell a missing bucket from a missing object: GCS answers 404 for both."""
        try:
            return bool(self._client("bucket_check").bucket(self.bucket).exists(
                retry=self._retry, timeout=self._timeout))
        except Exception:
            return True  # cannot tell; the caller reports the object as missing

    def _raise(self, exc: Exception, path: str, *, object_call: bool = True) -> NoReturn:
        """Translate a client error; messages name the bucket, never the credentials.

        A 404 from a call about one object (``object_call``) may mean the bucket is gone, so
        the bucket is looked up before the object is reported missing.
        """
        where = f"gs://{self.bucket}/{self.root}{path}"
        if isinstance(exc, StorageError):
            raise exc
        refusal = refusal_in(exc)
        if refusal is not None:
            raise EndpointRefused(f"{where}: {refusal}") from None
        if isinstance(exc, gexc.RetryError) and exc.cause is not None:
            exc = exc.cause if isinstance(exc.cause, Exception) else exc
        if isinstance(exc, auth_exc.TransportError) and exc.args and isinstance(
                exc.args[0], Exception):
            exc = exc.args[0]
        if isinstance(exc, DataCorruption):
            raise IntegrityError(f"{where}: CRC32C mismatch on download") from exc
        if isinstance(exc, InvalidResponse):
            status = getattr(getattr(exc, "response", None), "status_code", 0)
            exc = gexc.from_http_status(status, str(exc))
        if isinstance(exc, gexc.NotFound):
            if object_call and self._bucket_exists():
                raise ObjectNotFound(path) from None
            raise BucketNotFound(f"bucket {self.bucket!r} does not exist") from exc
        if isinstance(exc, gexc.PreconditionFailed):
            raise ObjectExists(path) from None
        if isinstance(exc, gexc.Forbidden):
            raise PermissionDenied(f"{where}: access denied ({exc.code})") from exc
        if isinstance(exc, gexc.Unauthorized):
            raise StorageAuthError(f"{where}: credentials rejected ({exc.code})") from exc
        if isinstance(exc, auth_exc.RefreshError | auth_exc.DefaultCredentialsError):
            raise StorageAuthError(f"{where}: cannot obtain credentials") from exc
        if isinstance(exc, gexc.GoogleAPICallError):
            if (exc.code or 0) >= 500 or exc.code == 429:
                raise StorageUnavailable(f"{where}: server error {exc.code}") from exc
            raise StorageError(f"{where}: HTTP {exc.code}: {exc.message}") from exc
        if isinstance(exc, requests.RequestException | gexc.RetryError | ConnectionError):
            raise StorageUnavailable(
                f"{where}: cannot reach {self.endpoint or 'GCS'}: {type(exc).__name__}"
            ) from exc
        raise StorageError(f"{where}: {type(exc).__name__}: {exc}") from exc


def _credentials(info: Mapping[str, Any] | str | None, anonymous: bool,
                 impersonate: str | None, allow_ambient: bool) -> Any:
    if anonymous:
        return AnonymousCredentials()
    if info:
        from google.oauth2 import service_account

        data = json.loads(info) if isinstance(info, str) else dict(info)
        data["token_uri"] = GOOGLE_TOKEN_URI  # a key pointing elsewhere would be an SSRF
        return service_account.Credentials.from_service_account_info(data, scopes=_SCOPES)
    if not impersonate and not allow_ambient:
        raise ValueError(NO_CREDENTIALS)
    import google.auth

    try:
        source, _ = google.auth.default(
            scopes=("https://www.googleapis.com/auth/cloud-platform",) if impersonate
            else _SCOPES)
    except auth_exc.DefaultCredentialsError as exc:
        raise StorageAuthError("this server has no Google identity to use") from exc
    if not impersonate:
        return source
    from google.auth import impersonated_credentials

    return impersonated_credentials.Credentials(
        source_credentials=source, target_principal=impersonate,
        target_scopes=list(_SCOPES), lifetime=3600)


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
