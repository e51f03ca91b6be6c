"""What a GCS client error means to the adapter's callers: the storage error tree
(storage_adapters/base), with messages that name the bucket, never the credentials."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from google.cloud.storage.exceptions import DataCorruption, InvalidResponse

from .base import (
    BucketNotFound,
    EndpointRefused,
    IntegrityError,
    ObjectExists,
    ObjectNotFound,
    PermissionDenied,
    StorageAuthError,
    StorageError,
    StorageUnavailable,
)
from .netguard import refusal_in


def raise_storage_error(exc: Exception, path: str, *, where: str, bucket: str,
                        endpoint: str | None, bucket_exists: Callable[[], bool] | None
                        ) -> NoReturn:
    """Raise what ``exc`` (from a call about ``path``, at ``where``) means. GCS answers 404
    alike for a missing object and a missing bucket: with ``bucket_exists`` (a call about
    one object) a 404 is the object's only if the bucket is still there."""
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
        if bucket_exists is not None and bucket_exists():
            raise ObjectNotFound(path) from None
        raise BucketNotFound(f"bucket {bucket!r} does not exist") from exc
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
            f"{where}: cannot reach {endpoint or 'GCS'}: {type(exc).__name__}"
        ) from exc
    raise StorageError(f"{where}: {type(exc).__name__}: {exc}") from exc
