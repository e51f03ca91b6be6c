"""The S3 adapter's connection to its bucket (boto3): settings, credentials, the client,
request counting, and the error translation every call goes through.

- botocore ≥ 1.36 adds CRC checksums to every request by default, which S3-compatible
  endpoints reject; for a non-AWS ``endpoint_url`` checksums are sent only when required
  (our explicit ChecksumSHA256 is still sent).
- boto3 clients are thread-safe; one client per adapter, shared by request threads.
- Every adapter's session shares one botocore data loader (``_LOADER``): S3's service model
  and the endpoint tables are parsed once per process, not once per bucket. A session of its
  own loaded them again, about 12 MB per tenant bucket (50 tenants' buckets: 618 MB against
  38 MB shared). Only the parsed models are shared; credentials stay each session's own.
- Credentials: the given key pair, or ``role_arn``: the server's own identity then only calls
  STS ``AssumeRole`` (ExternalId = the tenant id) and the assumed role's session credentials,
  refreshed by botocore before they expire, sign every bucket request. The server's default
  credential chain is used for the bucket itself only when the caller says so
  (``allow_ambient_credentials``, the operator's default bucket); otherwise an adapter without
  credentials is refused.
- With an ``endpoint_policy`` (storage_adapters/netguard.py) the endpoint is checked when the
  adapter is built and every connection is vetted at connect time; proxies from the
  environment are not used.

Every HTTP attempt is counted in ``stats`` by operation (``put``, ``get``, ``delete_batch``…).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn, Self

import boto3
import botocore.loaders
import botocore.session
from botocore.awsrequest import AWSHTTPConnectionPool, AWSHTTPSConnectionPool
from botocore.config import Config
from botocore.credentials import DeferredRefreshableCredentials
from botocore.exceptions import BotoCoreError, ClientError

from .base import (
    STREAM_PART_BYTES,
    EndpointRefused,
    RequestStats,
    StorageClasses,
    check_path,
    check_prefix,
)
from .bounded import DEFAULT_CALL_DEADLINE_SECONDS
from .deadlines import armed_pools, stop_retrying
from .netguard import EndpointNotAllowed, EndpointPolicy
from .s3_errors import error_code, raise_storage_error

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
_LOADER = botocore.loaders.create_loader()


def _session(**options: Any) -> boto3.session.Session:
    """A boto3 session of its own (credentials, region) on the process's shared loader."""
    core = botocore.session.Session()
    core.register_component("data_loader", _LOADER)
    return boto3.session.Session(botocore_session=core, **options)


NO_CREDENTIALS = ("an S3 bucket needs access_key_id and secret_access_key, or role_arn (a role "
                  "this server assumes with ExternalId = your tenant id); this server does not "
                  "lend its own AWS credentials")
CLASSES = StorageClasses("STANDARD", "STANDARD_IA", "GLACIER_IR",
                         ("STANDARD", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
                          "GLACIER_IR"))


class S3Connection:
    """What every S3 call stands on; :class:`storage_adapters.s3.S3Adapter` is the adapter."""

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
            session = _session(
                aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
                aws_session_token=session_token, region_name=region)
        elif role_arn:
            if not external_id:
                raise ValueError("assuming a role needs the tenant id as its ExternalId")
            session = _assumed_role_session(role_arn, external_id, region)
        elif allow_ambient_credentials:
            session = _session(region_name=region)
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
    def from_config(cls, config: Mapping[str, Any], **options: Any) -> Self:
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

    def _bucket_exists(self) -> bool:
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            return error_code(exc) not in ("404", "NoSuchBucket", "NotFound")
        except BotoCoreError:
            return True  # cannot tell; the caller reports the object as missing
        return True

    def _raise(self, exc: Exception, path: str) -> NoReturn:
        """Translate a botocore error (storage_adapters/s3_errors)."""
        raise_storage_error(exc, path, where=f"s3://{self.bucket}/{self.root}{path}",
                            bucket=self.bucket, endpoint_url=self.endpoint_url)

    def close(self) -> None:
        self._client.close()


def _assumed_role_session(role_arn: str, external_id: str, region: str | None
                          ) -> boto3.session.Session:
    """A session whose credentials are the role's, assumed with the server's own identity
    (used for nothing else) and refreshed by botocore before they expire."""
    sts = _session(region_name=region).client("sts")

    def assume() -> dict[str, Any]:
        answer = sts.assume_role(RoleArn=role_arn, ExternalId=external_id,
                                 RoleSessionName=f"memplane-{external_id}"[:64])
        credentials = answer["Credentials"]
        return {"access_key": credentials["AccessKeyId"],
                "secret_key": credentials["SecretAccessKey"],
                "token": credentials["SessionToken"],
                "expiry_time": credentials["Expiration"].isoformat()}

    session = _session(region_name=region)
    session._session._credentials = DeferredRefreshableCredentials(refresh_using=assume,
                                                                   method="assume-role")
    return session


def _is_aws(endpoint_url: str) -> bool:
    return ".amazonaws.com" in endpoint_url
