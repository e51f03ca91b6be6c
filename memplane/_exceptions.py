"""The exceptions the memplane SDK raises, all in one tree:

    MemplaneError
    ├── TransportError                  connection refused, timeout, broken stream (wraps httpx)
    ├── InvalidResponse                 a success answer the SDK cannot parse
    └── APIError                        the server answered with an error status
        ├── BadRequest                  400, 422 (also a ValueError)
        │   └── SensitiveData           422 "sensitive_data" (``kinds``: what the DLP guard found)
        ├── Unauthorized                401
        ├── Forbidden                   403
        ├── NotFound                    404 (also a LookupError)
        ├── Conflict                    409
        │   ├── HashMismatch            409 "hash_mismatch"
        │   └── SubjectErasureInProgress 409 "subject_erasure_in_progress"
        ├── PayloadTooLarge             413
        ├── StorageUnavailable          503 (``retry_after`` from the Retry-After header)
        └── ServerError                 any other 5xx

An error status without its own class (405, 429, ...) raises a plain ``APIError``.
``error_from_response`` is the one place a response is turned into an exception.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

__all__ = [
    "APIError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "HashMismatch",
    "InvalidResponse",
    "MemplaneError",
    "NotFound",
    "PayloadTooLarge",
    "SensitiveData",
    "ServerError",
    "StorageUnavailable",
    "SubjectErasureInProgress",
    "TransportError",
    "Unauthorized",
    "error_from_response",
]

_MAX_TEXT_DETAIL = 1000


class MemplaneError(Exception):
    """Base class of every exception the SDK raises."""


class TransportError(MemplaneError):
    """The request never got an HTTP answer; ``__cause__`` is the httpx error."""


class InvalidResponse(MemplaneError):
    """The server answered with success, but not with the JSON the contract promises."""


class APIError(MemplaneError):
    """The server answered with an error status.

    ``code`` is the server's ``error`` field, ``detail`` its human sentence, ``body`` the
    whole JSON object (empty when the body was not a JSON object) and ``request_id`` the
    ``X-Request-ID`` response header, to quote when reporting a problem.
    """

    def __init__(
        self,
        status_code: int,
        *,
        code: str | None = None,
        detail: str | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status_code = status_code
        self.code = code
        self.detail = detail
        self.body: dict[str, Any] = dict(body or {})
        self.headers = httpx.Headers(headers or {})
        self.request_id: str | None = self.headers.get("x-request-id")
        super().__init__(self._message())

    def _message(self) -> str:
        text = f"{self.status_code}"
        if self.code:
            text += f" {self.code}"
        if self.detail:
            text += f": {self.detail}"
        if self.request_id:
            text += f" (request id {self.request_id})"
        return text


class BadRequest(APIError, ValueError):
    """400 or 422: the server rejected the input."""


class SensitiveData(BadRequest):
    """422 ``sensitive_data``: the tenant's DLP policy refused the write; ``kinds`` names what
    was found (``card``, ``ssn``, ...), never the value. Nothing was written."""

    def __init__(
        self,
        status_code: int,
        *,
        code: str | None = None,
        detail: str | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, code=code, detail=detail, body=body, headers=headers)
        kinds = self.body.get("kinds")
        self.kinds: list[str] = [str(k) for k in kinds] if isinstance(kinds, list) else []


class Unauthorized(APIError):
    """401: the API key is missing, unknown or revoked."""


class Forbidden(APIError):
    """403: the key's role lacks the right for this call."""


class NotFound(APIError, LookupError):
    """404: no such object in this tenant."""


class Conflict(APIError):
    """409: the request conflicts with the stored state."""


class HashMismatch(Conflict):
    """409 ``hash_mismatch``: the bucket content no longer matches the recorded hash."""

    def __init__(
        self,
        status_code: int,
        *,
        code: str | None = None,
        detail: str | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, code=code, detail=detail, body=body, headers=headers)
        self.pointer_id: str | None = _optional_str(self.body.get("pointer_id"))
        self.expected_sha256: str | None = _optional_str(self.body.get("expected_sha256"))
        self.actual_sha256: str | None = _optional_str(self.body.get("actual_sha256"))


class SubjectErasureInProgress(Conflict):
    """409 ``subject_erasure_in_progress``: the user's data is being erased; writes wait."""


class PayloadTooLarge(APIError):
    """413: the value is larger than the server accepts."""


class StorageUnavailable(APIError):
    """503: the tenant's bucket is unreachable; ``retry_after`` is in seconds, or None."""

    def __init__(
        self,
        status_code: int,
        *,
        code: str | None = None,
        detail: str | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, code=code, detail=detail, body=body, headers=headers)
        self.retry_after: float | None = _parse_retry_after(self.headers.get("retry-after"))


class ServerError(APIError):
    """A 5xx other than 503: the server failed."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: BadRequest,
    503: StorageUnavailable,
}

# A code refines the status class only when it names a subclass of it, so a stray code on
# an unrelated status never changes which handler catches the error.
_BY_CODE: dict[str, type[APIError]] = {
    "hash_mismatch": HashMismatch,
    "subject_erasure_in_progress": SubjectErasureInProgress,
    "sensitive_data": SensitiveData,
}


def error_from_response(response: httpx.Response) -> APIError:
    """Build the exception for an error response (the caller raises it)."""
    status = response.status_code
    body, code, detail = _parse_error_body(response)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    refined = _BY_CODE.get(code or "")
    if refined is not None and issubclass(refined, cls):
        cls = refined
    return cls(status, code=code, detail=detail, body=body, headers=response.headers)


def _parse_error_body(response: httpx.Response) -> tuple[dict[str, Any], str | None, str | None]:
    text = response.text
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {}, None, (text.strip()[:_MAX_TEXT_DETAIL] or response.reason_phrase or None)
    code = _optional_str(data.get("error"))
    raw_detail = data.get("detail")
    if raw_detail is None or isinstance(raw_detail, str):
        detail = raw_detail
    else:  # e.g. a framework's list of validation errors
        detail = json.dumps(raw_detail, sort_keys=True)
    return data, code, detail


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either delay-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
