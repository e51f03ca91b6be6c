"""Descriptions that /openapi.json carries for path, query and header parameters (shared by
many routes, so written once here rather than in every signature), the real shape of the 422
answer (``app.validation_error``), which FastAPI would describe as its own, the API key as a
security scheme (so /docs has an Authorize button) and the error answers each route may give
(401/403/404/409/413/415/429/503, each with the ``{"error", "detail"}`` body)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

SCOPES = "user, conversation, agent, tenant (or another scope the server knows)"

# name -> description; (path prefix, name) overrides where one name means different things.
PARAMETERS: dict[str, str] = {
    "scope": f"The memory's scope: {SCOPES}.",
    "scope_ref": "Which user, conversation or agent the scope is about (for tenant-wide "
                 "memory: '-'). Percent-encode '/' and '%'.",
    "key": "The memory's key within the scope ref. Percent-encode '/' and '%'.",
    "Idempotency-Key": "Any unique string per logical write: a retry with the same key and "
                       "body returns the first answer (header Idempotent-Replayed: true) "
                       "instead of writing twice; the same key with another body answers 422 "
                       "idempotency_key_reused.",
    "user_id": "Only memories about this data subject.",
    "memory_type": "Only memories of this type.",
    "sync_status": "Only pointers in this state (e.g. pending_write, corrupt).",
    "limit": "Items per page, 1 to 1000; default 100.",
    "cursor": "The next_cursor of the previous page; leave out for the first page.",
    "pointer_id": "Only rows about this pointer.",
    "accessor_id": "Only rows of this accessor (an API key id, or job:<id>).",
    "operation": "Only rows of this operation (set, get, delete, export, erase, …).",
    "since": "Only rows at or after this time (ISO 8601; UTC if no zone is given).",
    "until": "Only rows before this time (ISO 8601; UTC if no zone is given).",
    "key_id": "The id of the API key, as returned when it was created.",
    "job_id": "The job's id, as returned by the export or erase request.",
    "receipt_id": "The receipt's id (the erasure job's result.receipt_id).",
}
OVERRIDES: dict[tuple[str, str], str] = {
    ("/v1/subjects/", "user_id"): "The data subject's user id, as given in memories' user_id "
                                  "(or the scope ref of their user-scoped memories).",
    ("/v1/pointers", "scope"): f"Only memories of this scope: {SCOPES}.",
    ("/v1/pointers", "scope_ref"): "Only memories of this scope ref.",
}

VALIDATION_ERROR = {
    "title": "ValidationError",
    "type": "object",
    "description": "The request did not match the schema (answer 422).",
    "properties": {
        "error": {"type": "string", "const": "validation_error",
                  "description": "Always 'validation_error'."},
        "detail": {"type": "string", "description": "One sentence per problem, naming where "
                   "it is, e.g. 'body.value: this field is required'."},
        "errors": {"type": "array", "description": "The problems, one object each.",
                   "items": {"$ref": "#/components/schemas/ValidationProblem"}},
    },
    "required": ["error", "detail", "errors"],
}
VALIDATION_PROBLEM = {
    "title": "ValidationProblem",
    "type": "object",
    "properties": {
        "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "description": "Where: 'body', 'query', 'path' or 'header', then the field."},
        "type": {"type": "string", "description": "The kind of problem (missing, "
                 "string_too_long, …)."},
        "msg": {"type": "string", "description": "What is wrong with it."},
    },
    "required": ["loc", "type", "msg"],
}


ERROR = {
    "title": "Error",
    "type": "object",
    "description": "Every refusal other than a schema mismatch: a code and one sentence "
                   "saying what to fix. Some codes add fields (e.g. retry_after).",
    "properties": {
        "error": {"type": "string", "description": "A short code: unauthorized, forbidden, "
                  "not_found, conflict, hash_mismatch, legal_hold, payload_too_large, "
                  "unsupported_media_type, too_many_jobs, storage_unavailable, "
                  "database_unavailable, …"},
        "detail": {"type": "string", "description": "One sentence saying what is wrong and "
                   "what to do about it."},
    },
    "required": ["error", "detail"],
    "additionalProperties": True,
}
SECURITY_SCHEME = "apiKey"
SECURITY = {
    "type": "http",
    "scheme": "bearer",
    "description": "An API key of your tenant, sent as 'Authorization: Bearer mp_…'. The "
                   "first start prints the default tenant's admin key (or set "
                   "MEMPLANE_ADMIN_KEY); admins create more with POST /v1/api-keys.",
}
# Answered without an API key (control_plane.key_gate.PUBLIC_PATHS).
PUBLIC = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs",
                    "/docs/oauth2-redirect", "/redoc"})
# Where a read of stored content may find it no longer matches its pointer (409).
CONTENT = ("/v1/memories", "/v1/events", "/v1/entries", "/memory", "/v1/search",
           "/v1/conversations", "/v1/knowledge")
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.",
                               "schema": {"type": "integer"}}}
ERRORS: dict[str, str] = {
    "401": "No API key, or one that is not valid: send 'Authorization: Bearer <key>'.",
    "403": "The key's role may not do this, or the key's scopes do not include the scope "
           "written to.",
    "404": "Not found; also the answer for another tenant's ids and for a read outside a "
           "scoped key's scopes (indistinguishable from missing).",
    "409": "A conflict: the stored object no longer matches its pointer (hash_mismatch), a "
           "legal hold, an erasure of the subject in progress, or a state the request "
           "cannot apply to.",
    "413": "The body is larger than MEMPLANE_MAX_BODY_BYTES, or the value to store larger "
           "than MEMPLANE_MAX_OBJECT_BYTES.",
    "415": "The body is not JSON: send it as application/json.",
    "429": "The tenant has its quota of jobs queued or running; retry after Retry-After "
           "seconds.",
    "503": "The database, the bucket or the key service is unavailable; retry after "
           "Retry-After seconds.",
}


def _error_codes(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    """The error answers an operation may give."""
    codes = ["401", "403"]
    if "{" in path:
        codes.append("404")
    if method != "get" or path.startswith(CONTENT):
        codes.append("409")
    if "requestBody" in operation:
        codes += ["413", "415"]
    if "202" in operation.get("responses", {}):  # queues a job
        codes.append("429")
    codes.append("503")
    return codes


def _document_errors(spec: dict[str, Any]) -> None:
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = ERROR
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = SECURITY
    spec["security"] = [{SECURITY_SCHEME: []}]
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            if path in PUBLIC:
                operation["security"] = []
                continue
            responses = operation.setdefault("responses", {})
            for code in _error_codes(path, method, operation):
                answer: dict[str, Any] = {"description": ERRORS[code], "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                if code in ("429", "503"):
                    answer["headers"] = RETRY_AFTER
                responses.setdefault(code, answer)


def install(app: FastAPI) -> None:
    """Have ``app.openapi()`` add the descriptions above to the generated document."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version,
                               description=app.description, routes=app.routes)
            describe(spec)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def describe(spec: dict[str, Any]) -> None:
    for path, item in spec.get("paths", {}).items():
        for operation in item.values():
            for param in operation.get("parameters", []):
                if param.get("description"):
                    continue
                name = param["name"]
                override = next((text for (prefix, n), text in OVERRIDES.items()
                                 if n == name and path.startswith(prefix)), None)
                text = override or PARAMETERS.get(name)
                if text:
                    param["description"] = text
    _document_errors(spec)
    schemas = spec.get("components", {}).get("schemas", {})
    if "HTTPValidationError" in schemas:
        schemas.pop("ValidationError", None)
        schemas["HTTPValidationError"] = VALIDATION_ERROR
        schemas["ValidationProblem"] = VALIDATION_PROBLEM
