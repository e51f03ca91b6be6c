"""Factories for server answers and a transport handler that records what it was sent.

The answers are built through the server's own response schemas (control_plane), so the
SDK is tested against replies the server can actually send; ``test_responses`` also holds
them against a real server's answer, field by field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import BaseModel

from control_plane.audit.schemas import AuditEntryOut, AuditVerificationOut
from control_plane.memories.schemas import PointerOut
from control_plane.tenants.schemas import CreatedApiKey, CreatedTenant

BASE_URL = "http://memplane.test"
API_KEY = "mp_test_key"
POINTER_ID = "0b5e3c1e-8d3f-4f7e-9a51-0d6c1f2e3a4b"
TENANT_ID = "5d1c0a4e-2b7f-4c3e-8f10-6a9b8c7d6e5f"
VERSION_ID = "0192f0c4-7a1b-7c2d-9e3f-4a5b6c7d8e9f"
KEY_ID = "8c2f4e6a-1b3d-4f5e-a7c9-0e2d4f6a8b1c"

Reply = httpx.Response | Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A ``MockTransport`` handler answering from a script, keeping every request."""

    def __init__(self, *replies: Reply) -> None:
        self._replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self._replies:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        reply = self._replies.pop(0)
        return reply(request) if callable(reply) else reply

    @property
    def only(self) -> httpx.Request:
        assert len(self.requests) == 1, self.requests
        return self.requests[0]


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content)


def pointer_json(**fields: Any) -> dict[str, Any]:
    """A pointer exactly as the server sends it: built through the server's own
    ``PointerOut`` and serialised the way FastAPI does (``mode="json"``), so a value the
    server could never send (a float importance, a missing field) fails here, not in use.
    An unknown name is refused too; add a field the server does not have by hand."""
    data: dict[str, Any] = {
        "id": POINTER_ID,
        "tenant_id": TENANT_ID,
        "scope": "user",
        "scope_ref": "u1",
        "key": "prefs",
        "memory_type": "preference",
        "title": "Preferences",
        "tags": ["ui"],
        "importance": 3,
        "source": "api",
        "user_id": "u1",
        "agent_id": None,
        "team_id": None,
        "storage_path": f"tenants/{TENANT_ID}/memories/user/u1/prefs/{VERSION_ID}.json",
        "content_sha256": "ab" * 32,
        "content_size": 17,
        "sync_status": "synced",
        "version": 3,
        "has_embeddings": False,
        "embedding_model": None,
        "created_at": "2025-01-02T03:04:05Z",
        "updated_at": "2025-01-03T03:04:05+00:00",
        "expires_at": None,
    }
    return _as_server_sends(PointerOut, data, fields)


def audit_json(**fields: Any) -> dict[str, Any]:
    """An audit row exactly as the server sends it (``AuditEntryOut``): what an agent key's
    read of a memory leaves."""
    data: dict[str, Any] = {
        "seq": 7,
        "pointer_id": POINTER_ID,
        "event_id": None,
        "accessor_type": "agent",
        "accessor_id": f"key:{KEY_ID}",
        "agent_id": None,
        "operation": "read",
        "success": True,
        "detail": "user user/u1 key=prefs",
        "request_id": "req-1",
        "accessed_at": "2025-01-02T03:04:05Z",
        "leaf": "eyJzZXEiOjd9",  # base64 of the row's leaf (its fields as canonical JSON)
    }
    return _as_server_sends(AuditEntryOut, data, fields)


def key_json(**fields: Any) -> dict[str, Any]:
    """A created API key as the server sends it (``CreatedApiKey``)."""
    data = {"id": KEY_ID, "role": "admin", "name": "ops", "scopes": None, "agent_id": None,
            "api_key": "mp_created_key"}
    return _as_server_sends(CreatedApiKey, data, fields)


def tenant_json(**fields: Any) -> dict[str, Any]:
    """A created tenant and its first admin key as the server sends them (``CreatedTenant``)."""
    data = {"tenant": {"id": TENANT_ID, "name": "acme"}, "api_key": "mp_tenant_key"}
    return _as_server_sends(CreatedTenant, data, fields)


def verification_json(**fields: Any) -> dict[str, Any]:
    """An audit chain check as the server sends it (``AuditVerificationOut``)."""
    data = {"ok": True, "checked": 3, "unsealed": 0, "first_bad_seq": None}
    return _as_server_sends(AuditVerificationOut, data, fields)


def _as_server_sends(schema: type[BaseModel], data: dict[str, Any],
                     fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(schema.model_fields)
    if unknown:
        raise TypeError(f"{schema.__name__} has no field(s) {sorted(unknown)}")
    return schema.model_validate({**data, **fields}).model_dump(mode="json")


def page_json(items: list[dict[str, Any]], next_cursor: str | None = None) -> dict[str, Any]:
    return {"items": items, "next_cursor": next_cursor}
