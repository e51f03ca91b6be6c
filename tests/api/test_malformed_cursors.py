"""A cursor the server did not write is a 422 with a sentence on every paginated route —
never a 500, however deep, long or strange it is."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.support.service import Tenant

pytestmark = pytest.mark.databases("sqlite")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


INVALID = {"error": "validation_error",
           "detail": "cursor is not valid; pass the next_cursor value of the previous page "
                     "unchanged"}
ROUTES = ["/v1/audit", "/v1/pointers", "/v1/pointers?order=key",
          "/v1/pointers?order=updated_desc", "/v1/events", "/v1/entries", "/v1/agents",
          "/memory", "/memory/events", "/v1/conversations/c-1/messages",
          "/v1/knowledge?agent_id=a"]
CURSORS = {
    "5000 brackets": _b64(b"[" * 5000),  # was a RecursionError: 500
    "3000 brackets": _b64(b"[" * 3000),  # as deep, within the length a cursor may have
    "600 braces": _b64(b'{"a":' * 600),
    "nested list": _b64(b'[["2024-01-01T00:00:00+00:00", "x"], 1]'),
    "nested object": _b64(b'{"seq": {"seq": 1}}'),
    "too long": _b64(b'"' + b"k" * 4000 + b'"'),
    "not base64": "%%%",
    "not UTF-8": _b64(b"\xff\xfe\xfd"),
    "not JSON": _b64(b"[1, 2"),
    "raw NUL": "\x00",
}
# Valid cursors of the server's encoding whose strings hold a NUL: PostgreSQL refuses NUL in
# text (a DataError, which was a 500 with no audit row).
NUL = {
    "NUL string": _b64(b'"\\u0000"'),
    "NUL in a list": _b64(b'["\\u0000","00000000-0000-0000-0000-000000000000"]'),
    "NUL in an object": _b64(b'{"seq":"\\u0000","id":"\\u001f"}'),
}


def _get(http: Any, route: str, cursor: str) -> Any:
    """GET ``route`` with ``cursor`` added to its own query (httpx's ``params`` would
    replace it)."""
    url = urlsplit(route)
    return http.get(url.path, params=[*parse_qsl(url.query), ("cursor", cursor)])


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(CURSORS))
def test_a_malformed_cursor_is_a_422(tenant: Tenant, route: str, name: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = _get(http, route, CURSORS[name])
    assert (answer.status_code, answer.json()) == (422, INVALID), answer.text


@pytest.mark.databases("sqlite", "postgres")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(NUL))
def test_a_cursor_holding_a_nul_is_a_422(tenant: Tenant, route: str, name: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = _get(http, route, NUL[name])
    assert (answer.status_code, answer.json()) == (422, INVALID), answer.text


@pytest.mark.databases("sqlite", "postgres")
def test_knowledge_pages_with_its_cursor_and_audits_a_bad_one(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        added = http.post("/v1/knowledge", json={"agent_id": "a", "documents": [
            {"title": f"doc {i}", "content": f"text {i}"} for i in range(3)]})
        assert added.status_code == 201, added.text
        ids: list[str] = []
        cursor = None
        while True:
            page = http.get("/v1/knowledge", params={"agent_id": "a", "limit": 2,
                                                     **({"cursor": cursor} if cursor else {})})
            assert page.status_code == 200, page.text
            ids += [d["document_id"] for d in page.json()["items"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
        assert ids == sorted(d["document_id"] for d in added.json()["documents"])
        refused = http.get("/v1/knowledge", params={"agent_id": "a", "cursor": "\x00"})
        assert (refused.status_code, refused.json()) == (422, INVALID)
        rows = http.get("/v1/audit", params={"operation": "knowledge_list"}).json()["items"]
    assert [(r["success"], r["detail"]) for r in rows] == [
        (True, "2 documents"), (True, "1 documents"),
        (False, "validation_error: cursor is not valid; pass the next_cursor value of the "
                "previous page unchanged")]


def test_a_cursor_the_server_wrote_still_pages(tenant: Tenant) -> None:
    """Brackets and quotes inside a cursor's strings (a memory key) are not nesting."""
    with tenant.stack.http(tenant.admin_key) as http:
        for key in ('a[[{"', 'b]]}\\', "c"):
            assert http.put(f"/v1/memories/user/u1/{key}",
                            json={"value": 1}).status_code == 200
        keys: list[str] = []
        cursor = None
        while True:
            page = http.get("/v1/pointers", params={"order": "key", "limit": 1,
                                                    **({"cursor": cursor} if cursor else {})})
            assert page.status_code == 200, page.text
            keys += [p["key"] for p in page.json()["items"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
    assert keys == ['a[[{"', 'b]]}\\', "c"]
