"""Memories by key accept ``source`` (on the general write path and the two-statement hot
path alike), ``GET /v1/pointers?tag=`` filters in SQL, and clearing a scope leaves its
entries alone — on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.service import Tenant


def _put(http: httpx.Client, path: str, body: dict[str, Any],
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    answer = http.put(f"/v1/memories/{path}", json=body, headers=headers or {})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_source_is_set_kept_and_replaced(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = _put(http, "user/u1/lang", {"value": "fr", "source": "chat"})  # new key
        kept = _put(http, "user/u1/lang", {"value": "de"})  # hot path, source left out
        replaced = _put(http, "user/u1/lang", {"value": "it", "source": "email"})
        idempotent = _put(http, "user/u1/other", {"value": 1, "source": "call"},
                          {"Idempotency-Key": "src-1"})
        appended = http.post("/v1/memories/user/u1/log/append",
                             json={"value": 1, "source": "manual"}).json()
        default = _put(http, "user/u1/plain", {"value": 1})
        read = http.get("/v1/memories/user/u1/lang").json()["pointer"]

    assert [p["source"] for p in (first, kept, replaced, idempotent, appended, default)] == [
        "chat", "chat", "email", "call", "manual", "api"]
    assert [p["version"] for p in (first, kept, replaced)] == [1, 2, 3]
    assert read["source"] == "email"


def test_source_compactor_and_unknown_sources_are_refused(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        compactor = http.put("/v1/memories/user/u1/k", json={"value": 1,
                                                             "source": "compactor"})
        unknown = http.put("/v1/memories/user/u1/k", json={"value": 1, "source": "fax"})
        listed = http.get("/v1/pointers").json()["items"]

    assert compactor.status_code == 422
    assert compactor.json()["detail"] == (
        "body.source: Value error, source 'compactor' is reserved for the compactor's own "
        "entries; send chat, call, email, manual or api")
    assert unknown.status_code == 422
    assert unknown.json()["detail"].startswith("body.source: Input should be 'chat'")
    assert listed == []


def test_pointers_filter_by_tag(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        a = _put(http, "user/u1/a", {"value": 1, "tags": ["lang", "pref"]})
        b = _put(http, "agent/bot/b", {"value": 2, "tags": ["pref"]})
        _put(http, "agent/bot/c", {"value": 3, "tags": ["preference"]})  # no prefix match
        _put(http, "agent/bot/d", {"value": 4})
        entry = http.post("/v1/entries", json={"scope": "entity", "scope_ref": "e1",
                                               "title": "t", "summary": "s",
                                               "tags": ["pref"]}).json()
        pref = http.get("/v1/pointers", params={"tag": "pref"}).json()
        lang_user = http.get("/v1/pointers", params={"tag": "lang", "scope": "user"}).json()
        none = http.get("/v1/pointers", params={"tag": "missing"}).json()
        quoted = http.get("/v1/pointers", params={"tag": 'pr"ef'}).json()
        paged = http.get("/v1/pointers", params={"tag": "pref", "limit": 2}).json()

    assert sorted(p["id"] for p in pref["items"]) == sorted([a["id"], b["id"], entry["id"]])
    assert [p["id"] for p in lang_user["items"]] == [a["id"]]
    assert none["items"] == [] and quoted["items"] == []
    assert len(paged["items"]) == 2 and paged["next_cursor"] is not None


def test_clearing_a_scope_leaves_its_entries(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "entity/e1/k", {"value": 1})
        entry = http.post("/v1/entries", json={"scope": "entity", "scope_ref": "e1",
                                               "title": "t", "summary": "kept"}).json()
        cleared = http.delete("/v1/memories/entity/e1").json()
        read = http.get(f"/v1/entries/{entry['id']}")

    assert cleared == {"deleted": 1}
    assert read.status_code == 200 and read.json()["summary"] == "kept"
