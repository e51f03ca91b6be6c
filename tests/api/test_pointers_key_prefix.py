"""``GET /v1/pointers?key_prefix=`` lists only keys that start with the text, taken literally
(``%`` and ``_`` are not wildcards), within what the key may see; a bad prefix is a 422
sentence — on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx

import memplane
from tests.support.service import Tenant


def _put(http: httpx.Client, scope: str, ref: str, key: str) -> str:
    answer = http.put(f"/v1/memories/{scope}/{ref}/{key}", json={"value": 1})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def _keys(http: httpx.Client, **params: str) -> list[str]:
    answer = http.get("/v1/pointers", params=params)
    assert answer.status_code == 200, answer.text
    return sorted(p["key"] for p in answer.json()["items"])


def test_pointers_filter_by_key_prefix_literally(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for key in ("lg%2Fa%2F1", "lg%2Fa%2F2", "lg%2Fab", "lgx", "lg_a", "lg%25a", "other"):
            _put(http, "conversation", "t1", key)
        _put(http, "conversation", "t2", "lg%2Fa%2F3")

        assert _keys(http, key_prefix="lg/a/") == ["lg/a/1", "lg/a/2", "lg/a/3"]
        assert _keys(http, key_prefix="lg/a/", scope_ref="t1") == ["lg/a/1", "lg/a/2"]
        assert _keys(http, key_prefix="lg_") == ["lg_a"]
        assert _keys(http, key_prefix="lg%") == ["lg%a"]
        assert _keys(http, key_prefix="nothing") == []
        empty = http.get("/v1/pointers", params={"key_prefix": ""})
        control = http.get("/v1/pointers", params={"key_prefix": "a\x01"})

    assert empty.status_code == 422 and control.status_code == 422
    assert "key_prefix" in empty.json()["detail"]


def test_a_scoped_key_lists_by_prefix_only_what_it_may_see(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "conversation", "mine", "lg%2F1")
        _put(http, "conversation", "theirs", "lg%2F2")
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="scoped",
                                   scopes=[("conversation", "mine")]).api_key
    with tenant.stack.http(scoped) as http:
        assert _keys(http, key_prefix="lg/") == ["lg/1"]
    with memplane.Client(tenant.stack.base_url, tenant.admin_key) as admin:
        listed = [entry.detail for entry in admin.audit.iter(operation="list")]
    assert "pointers scope=None ref=None user=None tag=None prefix=(given) -> 1" in listed


def test_pointers_listed_by_key_up_or_down_page_by_page(tenant: Tenant) -> None:
    keys = ["b", "a%2F2", "a%2F10", "B", "a_1", "é"]
    with tenant.stack.http(tenant.admin_key) as http:
        for key in keys:
            _put(http, "conversation", "t1", key)
        _put(http, "conversation", "t2", "a%2F2")  # the same key under another ref
        http.post("/v1/entries", json={"scope": "conversation", "scope_ref": "t1",
                                       "title": "no key", "summary": "s"}).raise_for_status()

        def walk(order: str, limit: int) -> list[tuple[str, str]]:
            seen: list[tuple[str, str]] = []
            cursor = None
            while True:
                params = {"scope": "conversation", "order": order, "limit": str(limit)}
                if cursor:
                    params["cursor"] = cursor
                page = http.get("/v1/pointers", params=params).json()
                seen += [(p["key"], p["scope_ref"]) for p in page["items"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    return seen

        up, down = walk("key", 2), walk("key_desc", 3)
        by_id = walk("created", 2)
        wrong = http.get("/v1/pointers", params={"order": "key", "cursor": http.get(
            "/v1/pointers", params={"limit": "1"}).json()["next_cursor"]})
        bad = http.get("/v1/pointers", params={"order": "size"})
    # Byte by byte: upper case before lower, "/" before digits, "é" (two bytes) last; a key
    # held under two refs twice; the entry (no key) is left out.
    expected = sorted([(k.replace("%2F", "/"), "t1") for k in keys] + [("a/2", "t2")])
    assert [k for k, _ in up] == ["B", "a/10", "a/2", "a/2", "a_1", "b", "é"]
    assert sorted(up) == expected
    assert [k for k, _ in down] == [k for k, _ in reversed(up)]
    assert len(by_id) == len(expected) + 1 and None in {k for k, _ in by_id}
    assert wrong.status_code == 422 and "cursor" in wrong.json()["detail"]
    assert bad.status_code == 422 and "order" in bad.json()["detail"]
