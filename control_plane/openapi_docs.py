"""Descriptions that /openapi.json carries for path, query and header parameters (shared by
many routes, so written once here rather than in every signature), and the real shape of
the 422 answer (``app.validation_error``), which FastAPI would describe as its own."""

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
                       "instead of writing twice; the same key with another body answers 409.",
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
    schemas = spec.get("components", {}).get("schemas", {})
    if "HTTPValidationError" in schemas:
        schemas.pop("ValidationError", None)
        schemas["HTTPValidationError"] = VALIDATION_ERROR
        schemas["ValidationProblem"] = VALIDATION_PROBLEM
