"""Bad input gets a 4xx with a sentence saying what to fix, never a 500, and writes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from control_plane.db.models import MemoryPointer
from tests.support.service import Tenant

BIG = b'{"value": "' + b"x" * (12 * 1024 * 1024) + b'"}'

CASES = [
    # (name, method, path, body bytes or None, headers, status, code, phrase in detail)
    ("traversal key", "PUT", "/v1/memories/user/u1/..%2Fx", b'{"value": 1}', {}, 422,
     "validation_error", "'..' path segments"),
    ("dot key", "PUT", "/v1/memories/user/u1/%2E", b'{"value": 1}', {}, 422,
     "validation_error", "'.' or '..'"),
    ("absolute key", "PUT", "/v1/memories/user/u1/%2Fetc%2Fpasswd", b'{"value": 1}', {}, 422,
     "validation_error", "absolute"),
    ("control character", "PUT", "/v1/memories/user/u1/a%00b", b'{"value": 1}', {}, 422,
     "validation_error", "U+0000"),
    ("too long key", "PUT", "/v1/memories/user/u1/" + "k" * 300, b'{"value": 1}', {}, 422,
     "validation_error", "at most 255 characters"),
    ("unknown scope", "PUT", "/v1/memories/galaxy/u1/k", b'{"value": 1}', {}, 422,
     "validation_error", "path.scope: Input should be"),
    ("tenant scope ref", "PUT", "/v1/memories/tenant/acme/k", b'{"value": 1}', {}, 422,
     "validation_error", "scope_ref '-'"),
    ("no value", "PUT", "/v1/memories/user/u1/k", b'{"tags": ["a"]}', {}, 422,
     "validation_error", "body.value: this field is required"),
    ("unknown field", "PUT", "/v1/memories/user/u1/k", b'{"value": 1, "colour": 2}', {}, 422,
     "validation_error", "body.colour: Extra inputs are not permitted"),
    ("malformed JSON", "PUT", "/v1/memories/user/u1/k", b'{"value": ', {}, 422,
     "validation_error", "not valid JSON"),
    ("importance out of range", "PUT", "/v1/memories/user/u1/k",
     b'{"value": 1, "importance": 9}', {}, 422, "validation_error", "body.importance"),
    ("bad memory type", "PUT", "/v1/memories/user/u1/k",
     b'{"value": 1, "memory_type": "Not A Type"}', {}, 422, "validation_error",
     "body.memory_type"),
    ("12 MiB body", "PUT", "/v1/memories/user/u1/k", BIG, {}, 413, "payload_too_large",
     "larger than 10485760 bytes"),
    ("NUL in a tag", "PUT", "/v1/memories/user/u1/k", b'{"value": 1, "tags": ["a\\u0000"]}',
     {}, 422, "validation_error", "body.tags.0"),
    ("NUL in a title", "PUT", "/v1/memories/user/u1/k", b'{"value": 1, "title": "\\u0000"}',
     {}, 422, "validation_error", "body.title"),
    ("NUL in a filter", "GET", "/v1/pointers?user_id=a%00b", None, {}, 422,
     "validation_error", "query.user_id"),
    ("unknown sync status", "GET", "/v1/pointers?sync_status=lost", None, {}, 422,
     "validation_error", "query.sync_status"),
    ("bad cursor", "GET", "/v1/pointers?cursor=%%%", None, {}, 422, "validation_error",
     "cursor is not valid"),
    ("limit too large", "GET", "/v1/pointers?limit=5000", None, {}, 422, "validation_error",
     "query.limit"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_clearly(tenant: Tenant, case: tuple) -> None:  # type: ignore[type-arg]
    _, method, path, body, headers, status, code, phrase = case
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.request(method, path, content=body,
                                headers={"content-type": "application/json", **headers})
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["error"] == code
    assert phrase in payload["detail"]
    assert _pointer_count(tenant) == 0
    assert tenant.objects() == []


def test_missing_and_wrong_keys_are_401(tenant: Tenant) -> None:
    with tenant.stack.http() as http:
        missing = http.put("/v1/memories/user/u1/k", json={"value": 1})
        wrong = http.put("/v1/memories/user/u1/k", json={"value": 1},
                         headers={"Authorization": "Bearer mp_not_a_real_key"})
        basic = http.put("/v1/memories/user/u1/k", json={"value": 1},
                         headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert [r.status_code for r in (missing, wrong, basic)] == [401, 401, 401]
    assert missing.json() == {"error": "unauthorized",
                              "detail": "send your API key as 'Authorization: Bearer <key>'"}
    assert "not valid" in wrong.json()["detail"]
    assert "Bearer" in basic.json()["detail"]
    assert _pointer_count(tenant) == 0


def test_revoked_key_stops_working(tenant: Tenant) -> None:
    with tenant.client() as admin:
        created = admin.keys.create(role="agent", name="temp")
        with tenant.stack.client(created.api_key) as agent:
            agent.memory.set(scope="user", scope_ref="u1", key="k", value=1)
            admin.keys.delete(created.id)
            with tenant.stack.http(created.api_key) as http:
                response = http.get("/v1/memories/user/u1/k")
    assert response.status_code == 401


def test_unknown_route_is_a_clear_404(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        response = http.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found",
                               "detail": "no such endpoint; see /docs for the API"}


def _pointer_count(tenant: Tenant) -> int:
    with tenant.stack.engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(MemoryPointer)
                           .where(MemoryPointer.tenant_id == tenant.id)) or 0
