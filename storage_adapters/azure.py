"""Azure Blob Storage (azure-storage-blob).

Backend facts this adapter relies on:

- Puts are create-only and carry an MD5: ``upload_blob(data, overwrite=False,
  validate_content=True)`` sends a transactional Content-MD5 the service checks, and the MD5
  is stored with the blob; an existing blob answers 409 BlobAlreadyExists → ObjectExists.
- Gets are read bounded (at most ``max_bytes``, within the call deadline:
  storage_adapters/azure_reads) and recompute the MD5 of the whole body to compare it with
  the stored Content-MD5; a mismatch raises IntegrityError. A blob rewritten out of band
  gets a new stored MD5 and reads back without complaint — the service's own SHA-256 is the
  final guard.
- ``delete_blobs`` takes at most 256 sub-requests per batch (Azurite accepts more; the limit
  is enforced here) and is not atomic: each sub-request is checked, and a missing blob
  (404) counts as deleted.
- Versions and soft-deleted blobs are listed with ``include=['versions', 'deleted']``; an
  emulator without them (Azurite) falls back to a plain listing. ``purge_versions`` deletes
  every version by id. Soft-deleted blobs stay restorable until the account's delete
  retention ends unless permanent delete is enabled; ``describe()`` reports the window.
- Azure SDK clients are thread-safe: one per adapter, shared by request threads.
- Credentials are always the tenant's own: a connection string with AccountKey or
  SharedAccessSignature, or account_url with account_key or sas_token (a service principal
  would need azure-identity, which is not a dependency).
- With an ``endpoint_policy`` (storage_adapters/netguard.py) the account URL the client ends
  up with (a connection string's BlobEndpoint, or AccountName + EndpointSuffix) is checked
  when the adapter is built and every connection is vetted at connect time; proxies from the
  environment are not used.
- A storage class is an access tier set in place (``set_standard_blob_tier``; the blob is
  not rewritten, its bytes and MD5 stay). Hot, Cool and Cold read back at once; the Archive
  tier needs hours of rehydration, so it is not offered.
- SDK messages can carry the request URL, which holds a SAS token when one is used, so
  errors are re-worded here and the secrets redacted.

Every HTTP attempt is counted in ``stats`` under the operation that caused it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO, NoReturn

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.blob import (
    BlobBlock,
    BlobClient,
    BlobServiceClient,
    ContentSettings,
    LinearRetry,
)
from urllib3.util.retry import Retry

from . import azure_reads
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
from .deadlines import bounded_calls, requests_session, stop_retrying
from .netguard import EndpointNotAllowed, EndpointPolicy, refusal_in

log = logging.getLogger(__name__)

DELETE_BATCH_LIMIT = 256
CLASSES = StorageClasses("Hot", "Cool", "Cold", ("Hot", "Cool", "Cold"))
_Names = list[str]
_AUTH_CODES = {"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch",
               "InvalidAuthenticationInfo", "NoAuthenticationInformation"}
# A SAS or role without the permission; AuthorizationFailure is also what a wrong key earns
# (Azurite), so it stays an authentication failure.
_DENIED_CODES = {"AuthorizationPermissionMismatch", "AuthorizationSourceIPMismatch",
                 "AuthorizationProtocolMismatch", "AuthorizationResourceTypeMismatch",
                 "AuthorizationServiceMismatch"}


class _CountedRetry(LinearRetry):  # type: ignore[misc]
    """The SDK's linear retry, marking the calling thread's next request as a resend (the
    policy sleeps once before each resend, in the thread that sends it)."""

    def __init__(self, local: threading.local, **options: Any) -> None:
        super().__init__(**options)
        self._marks = local

    def sleep(self, settings: Any, transport: Any) -> None:
        stop_retrying()  # not past the call's deadline
        self._marks.retrying = True
        super().sleep(settings, transport)


@bounded_calls("_delete_batch")  # each call within call_deadline (storage_adapters/deadlines)
class AzureAdapter:
    scheme = "az"

    def __init__(
        self, container: str, *, connection_string: str | None = None,
        account_url: str | None = None, account_key: str | None = None,
        sas_token: str | None = None, prefix: str = "", connect_timeout: float = 3.0,
        read_timeout: float = 20.0, max_attempts: int = 2,
        allow_ambient_credentials: bool = False, endpoint_policy: EndpointPolicy | None = None,
        archive_class: str | None = None, cold_class: str | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE_SECONDS,
    ) -> None:
        if not container:
            raise ValueError("an Azure store needs 'container'")
        self.call_deadline, self._read_timeout = call_deadline, read_timeout
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        if connection_string and not _conn_key(connection_string) and not allow_ambient_credentials:
            raise ValueError("an Azure connection_string must carry AccountKey or "
                             "SharedAccessSignature; this server does not lend its own "
                             "credentials")
        self.container = container
        self.part_size = STREAM_PART_BYTES
        self.root = check_prefix(prefix.strip("/") + "/") if prefix.strip("/") else ""
        self.stats = RequestStats()
        self._secrets = [s for s in (account_key, sas_token, _conn_key(connection_string)) if s]
        self._local = threading.local()
        options: dict[str, Any] = {
            "connection_timeout": connect_timeout, "read_timeout": read_timeout,
            "retry_policy": _CountedRetry(self._local, backoff=1, random_jitter_range=0,
                                          retry_total=max(0, max_attempts - 1)),
            "raw_request_hook": self._count,
        }
        if endpoint_policy is not None:
            if account_url and not connection_string:
                try:
                    endpoint_policy.check_endpoint(account_url)
                except EndpointNotAllowed as exc:
                    raise EndpointRefused(str(exc)) from None
        # Guarded connections, or (the operator's bucket) only deadline-bound ones.
        retries = Retry(total=False, redirect=False, raise_on_status=False)
        session = (endpoint_policy.requests_session(max_retries=retries)
                   if endpoint_policy is not None else requests_session(max_retries=retries))
        options["transport"] = RequestsTransport(
            session=session, session_owner=True, use_env_settings=endpoint_policy is None,
            connection_timeout=connect_timeout, read_timeout=read_timeout)
        if connection_string:
            service = BlobServiceClient.from_connection_string(connection_string, **options)
        elif account_url and (account_key or sas_token):
            service = BlobServiceClient(account_url, credential=account_key or sas_token,
                                        **options)
        else:
            raise ValueError("an Azure store needs 'connection_string', or 'account_url' "
                             "with 'account_key' or 'sas_token'")
        self.account_url = service.url.split("?", 1)[0].rstrip("/")
        if endpoint_policy is not None:
            try:
                endpoint_policy.check_endpoint(self.account_url)
            except EndpointNotAllowed as exc:
                service.close()
                raise EndpointRefused(str(exc)) from None
        self._service = service
        self._container = service.get_container_client(container)
        self._history_supported = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> AzureAdapter:
        """``options``: ``allow_ambient_credentials``, ``endpoint_policy`` and
        ``call_deadline``, never taken from ``config`` (which may come from a tenant)."""
        return cls(
            str(config.get("container") or config.get("bucket") or ""),
            connection_string=config.get("connection_string"),
            account_url=config.get("account_url"), account_key=config.get("account_key"),
            sas_token=config.get("sas_token"), prefix=str(config.get("prefix") or ""),
            connect_timeout=float(config.get("connect_timeout") or 3.0),
            read_timeout=float(config.get("read_timeout") or 20.0),
            max_attempts=int(config.get("max_attempts") or 2),
            allow_ambient_credentials=bool(options.get("allow_ambient_credentials")),
            endpoint_policy=options.get("endpoint_policy"),
            archive_class=config.get("archive_class"), cold_class=config.get("cold_class"),
            call_deadline=options.get("call_deadline") or DEFAULT_CALL_DEADLINE_SECONDS,
        )

    def _count(self, request: Any) -> None:
        # A resend after a failed attempt counts as ``retry``, not as another request of
        # its kind: the counts say how many operations reached the backend, and the
        # retries how often the SDK had to send one again.
        if getattr(self._local, "retrying", False):
            self._local.retrying = False
            self.stats.add("retry")
        else:
            self.stats.add(getattr(self._local, "kind", "other"))

    def _op(self, kind: str) -> None:
        self._local.kind = kind
        self._local.retrying = False

    def _key(self, path: str) -> str:
        return self.root + check_path(path)

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

    def close(self) -> None:
        self._service.close()

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

    def _where(self, path: str) -> str:
        return f"az://{self.container}/{self.root}{path}"

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return re.sub(r"(?i)(sig=)[^&\s'\"]+", r"\1***", text)

    def _raise(self, exc: AzureError, path: str) -> NoReturn:
        """Translate an SDK error; ``from None`` because SDK messages may hold a SAS token."""
        where = self._where(path)
        code = getattr(exc, "error_code", None)
        code = str(getattr(code, "value", code) or "")
        status = int(getattr(exc, "status_code", 0) or 0)
        if refusal_in(exc) is not None:
            raise EndpointRefused(f"{where}: {refusal_in(exc)}") from None
        if "MD5 mismatch" in str(exc):
            raise IntegrityError(f"{where}: {self._redact(str(exc))[:300]}") from None
        if isinstance(exc, ResourceNotFoundError):
            if code == "ContainerNotFound":
                raise BucketNotFound(
                    f"container {self.container!r} does not exist at {self.account_url}"
                ) from None
            raise ObjectNotFound(path) from None
        if isinstance(exc, ResourceExistsError) and code == "BlobAlreadyExists":
            raise ObjectExists(path) from None
        if code in _DENIED_CODES:
            raise PermissionDenied(f"{where}: access denied ({code})") from None
        if isinstance(exc, ClientAuthenticationError) or code in _AUTH_CODES or status in (
                401, 403):
            raise StorageAuthError(f"{where}: credentials rejected ({code or status})") from None
        if isinstance(exc, ServiceRequestError | ServiceResponseError):
            raise StorageUnavailable(
                f"{where}: cannot reach {self.account_url}: {type(exc).__name__}") from None
        if status >= 500:
            raise StorageUnavailable(f"{where}: server error {status} {code}") from None
        raise StorageError(f"{where}: {type(exc).__name__} {status} {code}: "
                           f"{self._redact(str(exc)).splitlines()[0][:300]}") from None


def _tier(tier: Any) -> str | None:
    """The SDK gives an access tier as a string or a StandardBlobTier enum."""
    value = getattr(tier, "value", tier)
    return str(value) if value else None


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _conn_key(connection_string: str | None) -> str | None:
    if not connection_string:
        return None
    match = re.search(r"(?i)(?:AccountKey|SharedAccessSignature)=([^;]+)", connection_string)
    return match.group(1) if match else None
