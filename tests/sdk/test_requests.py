"""Each SDK call sends exactly the request the HTTP contract describes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

import memplane

from .helpers import API_KEY, BASE_URL, Recorder, body_of, page_json, pointer_json

NO_BODY = object()

POINTER = httpx.Response(200, json=pointer_json())
CREATED_KEY = {"id": "key-2", "role": "agent", "name": "bot", "api_key": "mp_secret"}
CREATED_TENANT = {"tenant": {"id": "t2", "name": "acme"}, "api_key": "mp_admin"}
VERIFY = {"ok": True, "checked": 4, "unsealed": 1, "first_bad_seq": None}
SINCE = datetime(2025, 1, 1, tzinfo=UTC)
UNTIL = datetime(2025, 2, 1, 12, 30, tzinfo=UTC)

CASES: list[tuple[str, Callable[[memplane.Client], Any], httpx.Response, str, str, Any, dict]] = [
    (
        "set-minimal",
        lambda c: c.memory.set(scope="user", scope_ref="u1", key="prefs", value={"a": 1}),
        POINTER,
        "PUT",
        "/v1/memories/user/u1/prefs",
        {"value": {"a": 1}},
        {},
    ),
    (
        "set-full",
        lambda c: c.memory.set(
            scope="agent",
            scope_ref="bot-1",
            key="notes",
            value=["x", None],
            memory_type="fact",
            tags=["a", "b"],
            importance=4,
            title="Notes",
            user_id="u1",
            agent_id="bot-1",
            ttl_days=30,
            idempotency_key="idem-1",
        ),
        POINTER,
        "PUT",
        "/v1/memories/agent/bot-1/notes",
        {
            "value": ["x", None],
            "memory_type": "fact",
            "tags": ["a", "b"],
            "importance": 4,
            "title": "Notes",
            "user_id": "u1",
            "agent_id": "bot-1",
            "ttl_days": 30,
        },
        {"idempotency-key": "idem-1"},
    ),
    (
        "set-null-value",
        lambda c: c.memory.set(scope="user", scope_ref="u1", key="k", value=None),
        POINTER,
        "PUT",
        "/v1/memories/user/u1/k",
        {"value": None},
        {},
    ),
    (
        "set-tenant-default-ref",
        lambda c: c.memory.set(scope="tenant", key="policy", value="v"),
        POINTER,
        "PUT",
        "/v1/memories/tenant/-/policy",
        {"value": "v"},
        {},
    ),
    (
        "get",
        lambda c: c.memory.get(scope="user", scope_ref="u1", key="prefs"),
        httpx.Response(200, json={"value": 1, "pointer": pointer_json()}),
        "GET",
        "/v1/memories/user/u1/prefs",
        NO_BODY,
        {},
    ),
    (
        "get-institutional-default-ref",
        lambda c: c.memory.get(scope="institutional", key="k"),
        httpx.Response(200, json={"value": 1, "pointer": pointer_json()}),
        "GET",
        "/v1/memories/institutional/-/k",
        NO_BODY,
        {},
    ),
    (
        "append",
        lambda c: c.memory.append(scope="conversation", scope_ref="c9", key="log", value={"m": 1}),
        POINTER,
        "POST",
        "/v1/memories/conversation/c9/log/append",
        {"value": {"m": 1}},
        {},
    ),
    (
        "append-with-metadata",
        lambda c: c.memory.append(
            scope="user", scope_ref="u1", key="log", value=2, tags=["t"], idempotency_key="i2"
        ),
        POINTER,
        "POST",
        "/v1/memories/user/u1/log/append",
        {"value": 2, "tags": ["t"]},
        {"idempotency-key": "i2"},
    ),
    (
        "delete",
        lambda c: c.memory.delete(scope="user", scope_ref="u1", key="prefs"),
        httpx.Response(204),
        "DELETE",
        "/v1/memories/user/u1/prefs",
        NO_BODY,
        {},
    ),
    (
        "clear",
        lambda c: c.memory.clear(scope="project", scope_ref="p1"),
        httpx.Response(200, json={"deleted": 5}),
        "DELETE",
        "/v1/memories/project/p1",
        NO_BODY,
        {},
    ),
    (
        "clear-tenant",
        lambda c: c.memory.clear(scope="tenant"),
        httpx.Response(200, json={"deleted": 0}),
        "DELETE",
        "/v1/memories/tenant/-",
        NO_BODY,
        {},
    ),
    (
        "list-pointers-no-filters",
        lambda c: c.memory.list_pointers(),
        httpx.Response(200, json=page_json([])),
        "GET",
        "/v1/pointers",
        NO_BODY,
        {},
    ),
    (
        "list-pointers-all-filters",
        lambda c: c.memory.list_pointers(
            scope="user",
            scope_ref="u 1",
            user_id="u1",
            memory_type="fact",
            sync_status="pending",
            limit=10,
            cursor="abc=",
        ),
        httpx.Response(200, json=page_json([])),
        "GET",
        "/v1/pointers?scope=user&scope_ref=u+1&user_id=u1&memory_type=fact"
        "&sync_status=pending&limit=10&cursor=abc%3D",
        NO_BODY,
        {},
    ),
    (
        "audit-list",
        lambda c: c.audit.list(
            pointer_id="p1",
            accessor_id="key-1",
            operation="read",
            since=SINCE,
            until=UNTIL,
            limit=2,
            cursor="c1",
        ),
        httpx.Response(200, json=page_json([])),
        "GET",
        "/v1/audit?pointer_id=p1&accessor_id=key-1&operation=read"
        "&since=2025-01-01T00%3A00%3A00%2B00%3A00&until=2025-02-01T12%3A30%3A00%2B00%3A00"
        "&limit=2&cursor=c1",
        NO_BODY,
        {},
    ),
    (
        "audit-verify",
        lambda c: c.audit.verify(),
        httpx.Response(200, json=VERIFY),
        "GET",
        "/v1/audit/verify",
        NO_BODY,
        {},
    ),
    (
        "keys-create",
        lambda c: c.keys.create(role="agent", name="bot"),
        httpx.Response(201, json=CREATED_KEY),
        "POST",
        "/v1/api-keys",
        {"role": "agent", "name": "bot"},
        {},
    ),
    (
        "keys-create-idempotent",
        lambda c: c.keys.create(role="agent", name="bot", idempotency_key="ik"),
        httpx.Response(201, json=CREATED_KEY),
        "POST",
        "/v1/api-keys",
        {"role": "agent", "name": "bot"},
        {"idempotency-key": "ik"},
    ),
    (
        "keys-delete",
        lambda c: c.keys.delete("key/2"),
        httpx.Response(204),
        "DELETE",
        "/v1/api-keys/key%2F2",
        NO_BODY,
        {},
    ),
    (
        "tenants-create",
        lambda c: c.tenants.create(name="acme"),
        httpx.Response(201, json=CREATED_TENANT),
        "POST",
        "/v1/tenants",
        {"name": "acme"},
        {},
    ),
    (
        "health",
        lambda c: c.health(),
        httpx.Response(200, json={"status": "ok"}),
        "GET",
        "/healthz",
        NO_BODY,
        {},
    ),
    (
        "ready",
        lambda c: c.ready(),
        httpx.Response(200, json={"status": "ok"}),
        "GET",
        "/readyz",
        NO_BODY,
        {},
    ),
]


@pytest.mark.parametrize(
    ("call", "reply", "method", "target", "body", "extra_headers"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_request_shape(
    call: Callable[[memplane.Client], Any],
    reply: httpx.Response,
    method: str,
    target: str,
    body: Any,
    extra_headers: dict[str, str],
) -> None:
    recorder = Recorder(reply)
    with memplane.Client(BASE_URL, API_KEY, transport=httpx.MockTransport(recorder)) as client:
        call(client)

    request = recorder.only
    assert request.method == method
    assert str(request.url) == BASE_URL + target
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["user-agent"] == "memplane-python/0.1.0"
    assert request.headers["accept"] == "application/json"
    if body is NO_BODY:
        assert request.content == b""
        assert "content-type" not in request.headers
    else:
        assert body_of(request) == body
        assert request.headers["content-type"] == "application/json"
    sent_idempotency = {k: v for k, v in request.headers.items() if k == "idempotency-key"}
    assert sent_idempotency == extra_headers


def test_base_url_path_prefix_and_trailing_slash_are_kept() -> None:
    recorder = Recorder(httpx.Response(200, json={"deleted": 1}))
    with memplane.Client(
        "https://gw.example.com/memplane/", API_KEY, transport=httpx.MockTransport(recorder)
    ) as client:
        client.memory.clear(scope="user", scope_ref="u1")

    assert str(recorder.only.url) == "https://gw.example.com/memplane/v1/memories/user/u1"


def test_injected_http_client_headers_are_kept_and_ours_added() -> None:
    recorder = Recorder(httpx.Response(200, json=pointer_json()))
    http = httpx.Client(transport=httpx.MockTransport(recorder), headers={"X-Trace": "t-1"})
    client = memplane.Client(BASE_URL, API_KEY, http_client=http)

    client.memory.set(scope="user", scope_ref="u1", key="k", value=1)

    assert recorder.only.headers["x-trace"] == "t-1"
    assert recorder.only.headers["authorization"] == f"Bearer {API_KEY}"
    http.close()
