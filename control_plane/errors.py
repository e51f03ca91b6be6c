"""Domain errors carry their HTTP status and code; one handler in app.py renders them as
``{"error": code, "detail": sentence, **extra}``."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra
        # Set once the failure has been written to the audit log, so it is not written twice.
        self.audited = False

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class InvalidInput(DomainError):
    status_code = 422
    code = "validation_error"


class Unauthorized(DomainError):
    status_code = 401
    code = "unauthorized"


class Forbidden(DomainError):
    status_code = 403
    code = "forbidden"


class NotFound(DomainError):
    status_code = 404
    code = "not_found"


class Conflict(DomainError):
    status_code = 409
    code = "conflict"


class HashMismatch(Conflict):
    code = "hash_mismatch"


class SubjectErasureInProgress(Conflict):
    code = "subject_erasure_in_progress"


class PayloadTooLarge(DomainError):
    status_code = 413
    code = "payload_too_large"


class StorageUnavailable(DomainError):
    status_code = 503
    code = "storage_unavailable"

    def __init__(self, detail: str, *, retry_after: int = 5, **extra: Any) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after)}, **extra)


class StorageMisconfigured(DomainError):
    status_code = 502
    code = "storage_misconfigured"


class KeyServiceUnavailable(DomainError):
    status_code = 503
    code = "key_unavailable"

    def __init__(self, detail: str, *, retry_after: int = 5, **extra: Any) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after)}, **extra)
