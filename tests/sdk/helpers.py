"""Factories for server answers and a transport handler that records what it was sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

BASE_URL = "http://memplane.test"
API_KEY = "mp_test_key"

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


def pointer_json(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "0b5e3c1e-8d3f-4f7e-9a51-0d6c1f2e3a4b",
        "scope": "user",
        "scope_ref": "u1",
        "key": "prefs",
        "memory_type": "preference",
        "title": "Preferences",
        "tags": ["ui"],
        "importance": 0.5,
        "source": "api",
        "user_id": "u1",
        "agent_id": None,
        "storage_path": "tenants/t1/user/u1/prefs.json",
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
    data.update(overrides)
    return data


def audit_json(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "seq": 7,
        "pointer_id": "0b5e3c1e-8d3f-4f7e-9a51-0d6c1f2e3a4b",
        "accessor_type": "api_key",
        "accessor_id": "key-1",
        "operation": "read",
        "success": True,
        "detail": None,
        "request_id": "req-1",
        "accessed_at": "2025-01-02T03:04:05Z",
    }
    data.update(overrides)
    return data


def page_json(items: list[dict[str, Any]], next_cursor: str | None = None) -> dict[str, Any]:
    return {"items": items, "next_cursor": next_cursor}
