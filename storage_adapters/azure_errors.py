"""What an Azure SDK error means to the adapter's callers: the storage error tree
(storage_adapters/base). SDK messages can carry the request URL, which holds a SAS token
when one is used, so errors are re-worded here and the secrets redacted; every error is
raised ``from None`` for the same reason."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NoReturn

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)

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

AUTH_CODES = {"AuthenticationFailed", "AuthorizationFailure", "AuthorizationPermissionMismatch",
              "InvalidAuthenticationInfo", "NoAuthenticationInformation"}
# A SAS or role without the permission; AuthorizationFailure is also what a wrong key earns
# (Azurite), so it stays an authentication failure.
DENIED_CODES = {"AuthorizationPermissionMismatch", "AuthorizationSourceIPMismatch",
                "AuthorizationProtocolMismatch", "AuthorizationResourceTypeMismatch",
                "AuthorizationServiceMismatch"}


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return re.sub(r"(?i)(sig=)[^&\s'\"]+", r"\1***", text)


def raise_storage_error(exc: AzureError, path: str, *, where: str, container: str,
                        account_url: str, secrets: Sequence[str]) -> NoReturn:
    """Raise what ``exc`` (from a call about ``path``, at ``where``) means."""
    code = getattr(exc, "error_code", None)
    code = str(getattr(code, "value", code) or "")
    status = int(getattr(exc, "status_code", 0) or 0)
    if refusal_in(exc) is not None:
        raise EndpointRefused(f"{where}: {refusal_in(exc)}") from None
    if "MD5 mismatch" in str(exc):
        raise IntegrityError(f"{where}: {redact(str(exc), secrets)[:300]}") from None
    if isinstance(exc, ResourceNotFoundError):
        if code == "ContainerNotFound":
            raise BucketNotFound(
                f"container {container!r} does not exist at {account_url}"
            ) from None
        raise ObjectNotFound(path) from None
    if isinstance(exc, ResourceExistsError) and code == "BlobAlreadyExists":
        raise ObjectExists(path) from None
    if code in DENIED_CODES:
        raise PermissionDenied(f"{where}: access denied ({code})") from None
    if isinstance(exc, ClientAuthenticationError) or code in AUTH_CODES or status in (
            401, 403):
        raise StorageAuthError(f"{where}: credentials rejected ({code or status})") from None
    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        raise StorageUnavailable(
            f"{where}: cannot reach {account_url}: {type(exc).__name__}") from None
    if status >= 500:
        raise StorageUnavailable(f"{where}: server error {status} {code}") from None
    raise StorageError(f"{where}: {type(exc).__name__} {status} {code}: "
                       f"{redact(str(exc), secrets).splitlines()[0][:300]}") from None
