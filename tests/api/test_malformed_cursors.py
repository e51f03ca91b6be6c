"""A cursor the server did not write is a 422 with a sentence on every paginated route —
never a 500, however deep, long or strange it is."""

from __future__ import annotations

import base64

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
          "/memory", "/memory/events", "/v1/conversations/c-1/messages"]
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
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(CURSORS))
def test_a_malformed_cursor_is_a_422(tenant: Tenant, route: str, name: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.get(route, params={"cursor": CURSORS[name]})
    assert (answer.status_code, answer.json()) == (422, INVALID), answer.text


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
