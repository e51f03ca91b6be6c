"""Amazon S3 and S3-compatible stores (boto3).

Backend facts this adapter relies on:

- Puts are create-only and carry a SHA-256: ``put_object(..., ChecksumAlgorithm='SHA256',
  ChecksumSHA256=<b64>, IfNoneMatch='*')``; an existing key answers 412 → ObjectExists.
- Gets send ``ChecksumMode='ENABLED'``; the body is read bounded (at most ``max_bytes``,
  within the call deadline) and its stored SHA-256 checked (storage_adapters/s3_reads); a
  mismatch raises IntegrityError. An object written without a checksum (not by us) comes
  back unchecked — the service's own SHA-256 of the plaintext is the final guard.
- ``delete_objects`` takes at most 1000 keys per request (some emulators accept more; the
  limit is enforced here). Deleting a missing key succeeds.
- In a versioned bucket a delete only adds a delete marker: ``purge_versions`` lists every
  version and marker and deletes each by VersionId, 1000 per request.
- botocore ≥ 1.36 adds CRC checksums to every request by default, which S3-compatible
  endpoints reject; for a non-AWS ``endpoint_url`` checksums are sent only when required
  (our explicit ChecksumSHA256 is still sent).
- boto3 clients are thread-safe; one client per adapter, shared by request threads.
- Credentials: the given key pair, or ``role_arn``: the server's own identity then only calls
  STS ``AssumeRole`` (ExternalId = the tenant id) and the assumed role's session credentials,
  refreshed by botocore before they expire, sign every bucket request. The server's default
  credential chain is used for the bucket itself only when the caller says so
  (``allow_ambient_credentials``, the operator's default bucket); otherwise an adapter without
  credentials is refused.
- With an ``endpoint_policy`` (storage_adapters/netguard.py) the endpoint is checked when the
  adapter is built and every connection is vetted at connect time; proxies from the
  environment are not used.
- A storage class is changed by copying the object onto itself with ``StorageClass``
  (``copy_object``, metadata copied, the SHA-256 checksum recomputed by S3 over the same
  bytes), only if the object is still the one just looked at (``CopySourceIfMatch``). In a
  versioned bucket the copy is a new version: the one it was copied from is deleted by its
  VersionId, so the object keeps one version. Only classes that read back at once are
  offered (not GLACIER / DEEP_ARCHIVE, which need a restore first).

Every HTTP attempt is counted in ``stats`` by operation (``put``, ``get``, ``delete_batch``…).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, NoReturn

import boto3
import botocore.session
from botocore.awsrequest import AWSHTTPConnectionPool, AWSHTTPSConnectionPool
from botocore.config import Config
from botocore.credentials import DeferredRefreshableCredentials
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    HTTPClientError,
    NoCredentialsError,
)

from .base import (
    STREAM_PART_BYTES,
    BucketDescription,
    BucketNotFound,
    EndpointRefused,
    HealthReport,
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
    timed_probe,
)
from .bounded import DEFAULT_CALL_DEADLINE_SECONDS, Deadline
from .deadlines import armed_pools, bounded_calls, stop_retrying
from .netguard import EndpointNotAllowed, EndpointPolicy, refusal_in
from .s3_reads import PART_SIZE_META, checked_body, rechunked

log = logging.getLogger(__name__)

DELETE_BATCH_LIMIT = 1000
MIN_PART_BYTES = 5 << 20  # S3 refuses smaller parts, except the last
_PARALLEL_DELETES = 4

_KINDS = {
    "PutObject": "put", "GetObject": "get", "HeadObject": "head",
    "DeleteObject": "delete", "DeleteObjects": "delete_batch",
    "ListObjectsV2": "list", "ListObjectVersions": "list_versions",
    "GetBucketVersioning": "describe", "GetObjectLockConfiguration": "describe",
    "GetBucketLocation": "describe", "HeadBucket": "bucket_check",
    "CopyObject": "copy", "DeleteObjectVersion": "delete",
    "CreateMultipartUpload": "put_start", "UploadPart": "put_part",
    "CompleteMultipartUpload": "put_complete", "AbortMultipartUpload": "put_abort",
}
_AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken",
               "InvalidToken", "AuthorizationHeaderMalformed", "InvalidClientTokenId"}
_DENIED_CODES = {"AccessDenied", "AllAccessDisabled"}
NO_CREDENTIALS = ("an S3 bucket needs access_key_id and secret_access_key, or role_arn (a role "
                  "this server assumes with ExternalId = your tenant id); this server does not "
                  "lend its own AWS credentials")
_MISSING_CODES = {"NoSuchKey", "NotFound", "404", "NoSuchVersion"}
CLASSES = StorageClasses("STANDARD", "STANDARD_IA", "GLACIER_IR",
                         ("STANDARD", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
                          "GLACIER_IR"))


@bounded_calls("_delete_objects")  # each call within call_deadline (storage_adapters/deadlines)
class S3Adapter:
    scheme = "s3"

    def __init__(
        self, bucket: str, *, region: str | None = None, endpoint_url: str | None = None,
        access_key_id: str | None = None, secret_access_key: str | None = None,
        session_token: str | None = None, addressing_style: str | None = None,
        prefix: str = "", connect_timeout: float = 3.0, read_timeout: float = 20.0,
        max_attempts: int = 2, role_arn: str | None = None, external_id: str | None = None,
        allow_ambient_credentials: bool = False, endpoint_policy: EndpointPolicy | None = None,
        archive_class: str | None = None, cold_class: str | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE_SECONDS,
    ) -> None:
        if not bucket:
            raise ValueError("an S3 store needs 'bucket'")
        self.call_deadline = call_deadline
        self.storage_classes = CLASSES.with_overrides(archive_class, cold_class)
        if endpoint_policy is not None and endpoint_url:
            try:
                endpoint_policy.check_endpoint(endpoint_url)
            except EndpointNotAllowed as exc:
                raise EndpointRefused(str(exc)) from None
        self.bucket = bucket
        self.part_size = STREAM_PART_BYTES
        self.root = check_prefix(prefix.strip("/") + "/") if prefix.strip("/") else ""
        self.endpoint_url = endpoint_url
        self.stats = RequestStats()
        options: dict[str, Any] = {
            "connect_timeout": connect_timeout, "read_timeout": read_timeout,
            "retries": {"max_attempts": max_attempts, "mode": "standard"},
            "max_pool_connections": 32,
        }
        if addressing_style:
            options["s3"] = {"addressing_style": addressing_style}
        if endpoint_url and not _is_aws(endpoint_url):
            options["request_checksum_calculation"] = "when_required"
            options["response_checksum_validation"] = "when_required"
        if endpoint_policy is not None:
            options["proxies"] = {}  # a proxy would connect past the guard
        if access_key_id and secret_access_key:
            session = boto3.session.Session(
                aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
                aws_session_token=session_token, region_name=region)
        elif role_arn:
            if not external_id:
                raise ValueError("assuming a role needs the tenant id as its ExternalId")
            session = _assumed_role_session(role_arn, external_id, region)
        elif allow_ambient_credentials:
            session = boto3.session.Session(region_name=region)
        else:
            raise ValueError(NO_CREDENTIALS)
        self._client = session.client("s3", endpoint_url=endpoint_url, config=Config(**options))
        self._client.meta.events.register("before-send.s3.*", self._count)
        self._client.meta.events.register_first("needs-retry.s3", stop_retrying)
        # Guarded connections, or (the operator's bucket) only deadline-bound ones.
        pools = (endpoint_policy.urllib3_pool_classes if endpoint_policy is not None
                 else armed_pools)(AWSHTTPConnectionPool, AWSHTTPSConnectionPool)
        http = self._client._endpoint.http_session  # botocore's URLLib3Session
        http._pool_classes_by_scheme = pools
        http._manager.pool_classes_by_scheme = pools

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> S3Adapter:
        """``options``: ``allow_ambient_credentials``, ``endpoint_policy`` and
        ``call_deadline``, never taken from ``config`` (which may come from a tenant)."""
        def num(key: str, default: float) -> float:
            return float(config.get(key) or default)

        return cls(
            str(config.get("bucket") or ""), region=config.get("region"),
            endpoint_url=config.get("endpoint_url"),
            access_key_id=config.get("access_key_id"),
            secret_access_key=config.get("secret_access_key"),
            session_token=config.get("session_token"),
            addressing_style=config.get("addressing_style"),
            prefix=str(config.get("prefix") or ""),
            connect_timeout=num("connect_timeout", 3.0), read_timeout=num("read_timeout", 20.0),
            max_attempts=int(num("max_attempts", 2)),
            role_arn=config.get("role_arn"), external_id=config.get("external_id"),
            allow_ambient_credentials=bool(options.get("allow_ambient_credentials")),
            endpoint_policy=options.get("endpoint_policy"),
            archive_class=config.get("archive_class"), cold_class=config.get("cold_class"),
            call_deadline=options.get("call_deadline") or DEFAULT_CALL_DEADLINE_SECONDS,
        )

    def _count(self, request: Any = None, event_name: str = "", **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        self.stats.add(_KINDS.get(operation, operation))

    def _key(self, path: str) -> str:
        return self.root + check_path(path)

    def _path(self, key: str) -> str:
        return key[len(self.root):]

    def put(self, path: str, data: bytes) -> None:
        key = self._key(path)
        digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
        try:
            self._client.put_object(
                Bucket=self.bucket, Key=key, Body=data, ChecksumAlgorithm="SHA256",
                ChecksumSHA256=digest, IfNoneMatch="*",
            )
        except ClientError as exc:
            if _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
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
            if _code(exc) not in _MISSING_CODES:
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
            if isinstance(exc, ClientError) and _code(exc) in (
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
            if _code(exc) != "NoSuchUpload":
                log.warning("could not abort a multipart upload in s3://%s: %s",
                            self.bucket, _code(exc))
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
            if _code(exc) in _MISSING_CODES and not self._bucket_exists():
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

    def _bucket_exists(self) -> bool:
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            return _code(exc) not in ("404", "NoSuchBucket", "NotFound")
        except BotoCoreError:
            return True  # cannot tell; the caller reports the object as missing
        return True

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
            error_type = StorageAuthError if code in _AUTH_CODES else StorageError
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
            if _code(exc) != "ObjectLockConfigurationNotFoundError":
                notes.append(f"object lock not readable: {_code(exc)}")
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

    def close(self) -> None:
        self._client.close()

    def _raise(self, exc: Exception, path: str) -> NoReturn:
        """Translate a botocore error; messages name the bucket, never the credentials."""
        where = f"s3://{self.bucket}/{self.root}{path}"
        refusal = refusal_in(exc)
        if refusal is not None:
            raise EndpointRefused(f"{where}: {refusal}") from None
        if isinstance(exc, ClientError):
            code = _code(exc)
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if exc.operation_name == "AssumeRole":
                raise StorageAuthError(f"{where}: the role could not be assumed ({code})") \
                    from exc
            if code in _DENIED_CODES or (status == 403 and code not in _AUTH_CODES):
                raise PermissionDenied(f"{where}: access denied ({code})") from exc
            if code == "NoSuchBucket":
                raise BucketNotFound(f"bucket {self.bucket!r} does not exist") from exc
            if code in _MISSING_CODES:
                raise ObjectNotFound(path) from None
            if code in _AUTH_CODES or status in (401, 403):
                raise StorageAuthError(f"{where}: credentials rejected ({code})") from exc
            if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "InternalError"):
                raise StorageUnavailable(f"{where}: server error {status} {code}") from exc
            raise StorageError(f"{where}: {code} (HTTP {status})") from exc
        if isinstance(exc, NoCredentialsError):
            raise StorageAuthError(f"{where}: no credentials configured") from exc
        if isinstance(exc, ConnectionError | HTTPClientError):
            raise StorageUnavailable(
                f"{where}: cannot reach {self.endpoint_url or 'S3'}: {type(exc).__name__}"
            ) from exc
        raise StorageError(f"{where}: {type(exc).__name__}: {exc}") from exc


def _assumed_role_session(role_arn: str, external_id: str, region: str | None
                          ) -> boto3.session.Session:
    """A session whose credentials are the role's, assumed with the server's own identity
    (used for nothing else) and refreshed by botocore before they expire."""
    sts = boto3.session.Session(region_name=region).client("sts")

    def assume() -> dict[str, Any]:
        answer = sts.assume_role(RoleArn=role_arn, ExternalId=external_id,
                                 RoleSessionName=f"memplane-{external_id}"[:64])
        credentials = answer["Credentials"]
        return {"access_key": credentials["AccessKeyId"],
                "secret_key": credentials["SecretAccessKey"],
                "token": credentials["SessionToken"],
                "expiry_time": credentials["Expiration"].isoformat()}

    core = botocore.session.get_session()
    core._credentials = DeferredRefreshableCredentials(refresh_using=assume,
                                                       method="assume-role")
    return boto3.session.Session(botocore_session=core, region_name=region)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _is_aws(endpoint_url: str) -> bool:
    return ".amazonaws.com" in endpoint_url
