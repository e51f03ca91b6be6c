"""What a botocore error means to the S3 adapter's callers: the storage error tree
(storage_adapters/base), with messages that name the bucket, never the credentials."""

from __future__ import annotations

from typing import NoReturn

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, NoCredentialsError

from .base import (
    BucketNotFound,
    EndpointRefused,
    ObjectNotFound,
    PermissionDenied,
    StorageAuthError,
    StorageError,
    StorageUnavailable,
)
from .netguard import refusal_in

AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken",
              "InvalidToken", "AuthorizationHeaderMalformed", "InvalidClientTokenId"}
DENIED_CODES = {"AccessDenied", "AllAccessDisabled"}
MISSING_CODES = {"NoSuchKey", "NotFound", "404", "NoSuchVersion"}


def raise_storage_error(exc: Exception, path: str, *, where: str, bucket: str,
                        endpoint_url: str | None) -> NoReturn:
    """Raise what ``exc`` (from a call about ``path``, at ``where``) means."""
    refusal = refusal_in(exc)
    if refusal is not None:
        raise EndpointRefused(f"{where}: {refusal}") from None
    if isinstance(exc, ClientError):
        code = error_code(exc)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if exc.operation_name == "AssumeRole":
            raise StorageAuthError(f"{where}: the role could not be assumed ({code})") \
                from exc
        if code in DENIED_CODES or (status == 403 and code not in AUTH_CODES):
            raise PermissionDenied(f"{where}: access denied ({code})") from exc
        if code == "NoSuchBucket":
            raise BucketNotFound(f"bucket {bucket!r} does not exist") from exc
        if code in MISSING_CODES:
            raise ObjectNotFound(path) from None
        if code in AUTH_CODES or status in (401, 403):
            raise StorageAuthError(f"{where}: credentials rejected ({code})") from exc
        if status >= 500 or code in ("SlowDown", "ServiceUnavailable", "InternalError"):
            raise StorageUnavailable(f"{where}: server error {status} {code}") from exc
        raise StorageError(f"{where}: {code} (HTTP {status})") from exc
    if isinstance(exc, NoCredentialsError):
        raise StorageAuthError(f"{where}: no credentials configured") from exc
    if isinstance(exc, ConnectionError | HTTPClientError):
        raise StorageUnavailable(
            f"{where}: cannot reach {endpoint_url or 'S3'}: {type(exc).__name__}"
        ) from exc
    raise StorageError(f"{where}: {type(exc).__name__}: {exc}") from exc


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
