"""A read's parameters, on a live server (SQLite and PostgreSQL): the plain ones (a known scope,
no query or ``refresh_ttl=true|false``) take the route's short way (plain_params.py), every
other one FastAPI's — both answer the same, and an unusual request is checked as before."""

from __future__ import annotations

from datetime import datetime

from tests.support.service import Tenant

PATH = "/v1/memories/user/u1/k"


def _written(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.put(PATH, json={"value": {"v": 1}, "ttl_days": 2})
        assert answer.status_code == 200


def test_plain_and_unusual_queries_answer_the_same(tenant: Tenant) -> None:
    _written(tenant)
    with tenant.stack.http(tenant.admin_key) as http:
        plain = http.get(PATH)
        other = http.get(PATH, params={"unrelated": "x"})  # FastAPI's way: an unknown query
        spelled = http.get(PATH, params={"refresh_ttl": "no"})  # FastAPI's bool, false
    assert [a.status_code for a in (plain, other, spelled)] == [200, 200, 200]
    assert plain.json() == other.json() == spelled.json()
    assert plain.json()["value"] == {"v": 1}
    assert plain.headers["x-request-id"] != other.headers["x-request-id"]


def test_refresh_ttl_spelled_either_way_restarts_the_ttl(tenant: Tenant) -> None:
    _written(tenant)
    with tenant.stack.http(tenant.admin_key) as http:
        before = datetime.fromisoformat(http.get(PATH).json()["pointer"]["expires_at"])
        plain = http.get(PATH, params={"refresh_ttl": "true"})
        first = datetime.fromisoformat(plain.json()["pointer"]["expires_at"])
        spelled = http.get(PATH, params={"refresh_ttl": "yes"})
        second = datetime.fromisoformat(spelled.json()["pointer"]["expires_at"])
        unmoved = http.get(PATH, params={"refresh_ttl": "false"})
    assert (plain.status_code, spelled.status_code) == (200, 200)
    assert before < first < second
    assert datetime.fromisoformat(unmoved.json()["pointer"]["expires_at"]) == second


def test_an_unknown_scope_or_bad_flag_is_fastapis_422(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        scope = http.get("/v1/memories/galaxy/u1/k")
        flag = http.get(PATH, params={"refresh_ttl": "maybe"})
    assert scope.status_code == flag.status_code == 422
    assert scope.json()["error"] == flag.json()["error"] == "validation_error"
    assert [e["loc"] for e in scope.json()["errors"]] == [["path", "scope"]]
    assert [e["loc"] for e in flag.json()["errors"]] == [["query", "refresh_ttl"]]
    assert scope.json()["detail"].startswith("path.scope: Input should be 'tenant'")


def test_a_plain_read_still_checks_the_key_and_its_role(tenant: Tenant) -> None:
    _written(tenant)
    with tenant.stack.http() as anonymous, tenant.stack.http("mp_not_a_key") as wrong:
        none, bad = anonymous.get(PATH), wrong.get(PATH)
    assert (none.status_code, bad.status_code) == (401, 401)
    with tenant.client() as admin:  # a data subject's key reads only its own subject's
        other = admin.keys.create(role="user", name="u2", user_id="u2").api_key
        own = admin.keys.create(role="user", name="u1", user_id="u1").api_key
    with tenant.stack.http(other) as http:
        refused = http.get(PATH)
    with tenant.stack.http(own) as http:
        served = http.get(PATH)
    assert (refused.status_code, refused.json()["detail"]) == (404, "no memory at user/u1 key=k")
    assert (served.status_code, served.json()["value"]) == (200, {"v": 1})
