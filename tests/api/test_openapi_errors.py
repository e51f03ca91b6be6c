"""/openapi.json says how to authenticate (a bearer API key, applied to every route but the
public ones, so /docs has an Authorize button) and documents the error answers each route may
give, each with the ``{"error", "detail"}`` body the server really sends."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.service import Stack

pytestmark = pytest.mark.databases("sqlite")

METHODS = {"get", "put", "post", "delete", "patch"}
ERROR_REF = {"$ref": "#/components/schemas/Error"}


@pytest.fixture(scope="module")
def spec(stack: Stack) -> dict[str, Any]:
    with stack.http() as http:
        response = http.get("/openapi.json")
    assert response.status_code == 200
    return dict(response.json())


def _operations(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{method.upper()} {path}": op for path, item in spec["paths"].items()
            for method, op in item.items() if method in METHODS}


def _error_schema(op: dict[str, Any], code: str) -> Any:
    return op["responses"][code]["content"]["application/json"]["schema"]


def test_the_api_key_is_a_bearer_scheme_applied_to_every_route(spec: dict[str, Any]) -> None:
    assert spec["components"]["securitySchemes"]["apiKey"]["type"] == "http"
    assert spec["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert spec["security"] == [{"apiKey": []}]
    operations = _operations(spec)
    public = sorted(name for name, op in operations.items() if op.get("security") == [])
    assert public == ["GET /healthz", "GET /readyz"]


def test_every_authenticated_route_documents_its_error_answers(spec: dict[str, Any]) -> None:
    operations = _operations(spec)
    missing: list[str] = []
    for name, op in operations.items():
        if op.get("security") == []:
            continue
        method, path = name.split(" ", 1)
        wanted = {"401", "403", "503"}
        if "{" in path:
            wanted.add("404")
        if "requestBody" in op:
            wanted |= {"413", "415"}
        if "202" in op["responses"]:
            wanted.add("429")
        missing += [f"{name} {code}" for code in sorted(wanted)
                    if code not in op["responses"] or _error_schema(op, code) != ERROR_REF]
    assert len(operations) > 90
    assert missing == []
    put = operations["PUT /v1/memories/{scope}/{scope_ref}/{key}"]
    assert sorted(put["responses"]) == ["200", "401", "403", "404", "409", "413", "415", "422",
                                        "503"]
    assert sorted(operations["GET /v1/pointers"]["responses"]) == ["200", "401", "403", "422",
                                                                   "503"]
    export = operations["POST /v1/subjects/{user_id}/export"]["responses"]
    assert export["429"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    error = spec["components"]["schemas"]["Error"]
    assert error["required"] == ["error", "detail"]


def test_the_idempotency_key_description_names_the_answer_the_server_gives(
        spec: dict[str, Any]) -> None:
    put = _operations(spec)["PUT /v1/memories/{scope}/{scope_ref}/{key}"]
    [header] = [p for p in put["parameters"] if p["name"] == "Idempotency-Key"]
    assert "another body answers 422 idempotency_key_reused" in header["description"]
    assert "409" not in header["description"]


def test_documented_errors_are_the_answers_the_server_gives(stack: Stack) -> None:
    tenant = stack.new_tenant()
    with stack.http() as anonymous:
        unauthorized = anonymous.get("/v1/pointers")
    with stack.http(tenant.admin_key) as http:
        first = http.put("/v1/memories/user/u1/k", json={"value": 1},
                         headers={"Idempotency-Key": "same"})
        reused = http.put("/v1/memories/user/u1/k", json={"value": 2},
                          headers={"Idempotency-Key": "same"})
        not_json = http.put("/v1/memories/user/u1/k", content=b"value=1",
                            headers={"Content-Type": "text/plain"})
        missing = http.get("/v1/memories/user/u1/nothing")
    assert first.status_code == 200
    answers: dict[int, httpx.Response] = {
        401: unauthorized, 422: reused, 415: not_json, 404: missing}
    assert {code: r.status_code for code, r in answers.items()} == {
        401: 401, 422: 422, 415: 415, 404: 404}
    for answer in answers.values():
        body = answer.json()
        assert isinstance(body["error"], str) and isinstance(body["detail"], str), body
    assert reused.json()["error"] == "idempotency_key_reused"
