"""A write's parameters and body, on a live server (SQLite and PostgreSQL): a plain write (a
known scope, no query, a body sent as ``application/json``) takes the route's short way, its
body validated beside the endpoint (plain_params.py); every other one FastAPI's. Both answer
the same, and a body the model refuses gets FastAPI's 422 as before."""

from __future__ import annotations

import json

from tests.support.service import Tenant

PATH = "/v1/memories/user/u1/k"
SAME = ("scope", "scope_ref", "key", "memory_type", "tags", "importance", "user_id",
        "sync_status")


def test_plain_and_other_writes_answer_the_same(tenant: Tenant) -> None:
    body = {"value": {"v": 1}, "tags": ["a"], "importance": 4, "memory_type": "fact"}
    with tenant.stack.http(tenant.admin_key) as http:
        plain = http.put(PATH, json=body)
        charset = http.put(PATH, content=json.dumps(body),  # FastAPI's way
                           headers={"content-type": "application/json; charset=utf-8"})
        query = http.put(PATH, json=body, params={"unrelated": "x"})  # FastAPI's way
        read = http.get(PATH)
    assert [a.status_code for a in (plain, charset, query)] == [200, 200, 200]
    assert [a.json()["version"] for a in (plain, charset, query)] == [1, 2, 3]
    assert {k: plain.json()[k] for k in SAME} == {k: charset.json()[k] for k in SAME} == {
        k: query.json()[k] for k in SAME}
    assert (plain.json()["tags"], plain.json()["importance"]) == (["a"], 4)
    assert read.json()["value"] == {"v": 1}
    assert read.json()["pointer"]["version"] == 3


def test_a_refused_body_is_fastapis_422(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        extra = http.put(PATH, json={"value": 1, "colour": "red"})
        missing = http.put(PATH, json={"tags": ["a"]})
        broken = http.put(PATH, content=b'{"value": ', headers={
            "content-type": "application/json"})
        typed = http.put(PATH, json={"value": 1, "importance": "high"})
        nothing = http.get(PATH)
    for answer in (extra, missing, broken, typed):
        assert (answer.status_code, answer.json()["error"]) == (422, "validation_error")
    assert [e["loc"] for e in extra.json()["errors"]] == [["body", "colour"]]
    assert [e["loc"] for e in missing.json()["errors"]] == [["body", "value"]]
    assert [e["loc"] for e in typed.json()["errors"]] == [["body", "importance"]]
    assert broken.json()["errors"][0]["type"] == "json_invalid"
    assert nothing.status_code == 404  # nothing was written


def test_a_plain_write_keeps_its_idempotency_key(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        headers = {"Idempotency-Key": "w-1"}
        first = http.put(PATH, json={"value": 1}, headers=headers)
        again = http.put(PATH, json={"value": 1}, headers=headers)
        other = http.put(PATH, json={"value": 2}, headers=headers)
        listed = http.get("/v1/pointers").json()["items"]
    assert (first.status_code, again.status_code, other.status_code) == (200, 200, 422)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert [p["version"] for p in listed] == [1]


def test_a_plain_write_still_checks_the_key_and_its_role(tenant: Tenant) -> None:
    with tenant.stack.http() as anonymous:
        none = anonymous.put(PATH, json={"value": 1})
    assert none.status_code == 401
    with tenant.client() as admin:
        reader = admin.keys.create(role="compliance", name="c").api_key  # reads only
        other = admin.keys.create(role="user", name="u2", user_id="u2").api_key
        own = admin.keys.create(role="user", name="u1", user_id="u1").api_key
    with tenant.stack.http(reader) as r, tenant.stack.http(other) as o, \
            tenant.stack.http(own) as u:
        refused = r.put(PATH, json={"value": 1})
        elsewhere = o.put(PATH, json={"value": 1})
        written = u.put(PATH, json={"value": 1})
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert (elsewhere.status_code, elsewhere.json()["error"]) == (403, "forbidden")
    assert (written.status_code, written.json()["user_id"]) == (200, "u1")
