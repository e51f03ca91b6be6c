"""The API describes itself: every operation, parameter and request/response field in
/openapi.json has a description, every request body an example, and /docs and /redoc load
only assets this server serves (no CDN, so they work offline)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.service import Stack

pytestmark = pytest.mark.databases("sqlite")

METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture(scope="module")
def spec(stack: Stack) -> dict[str, Any]:
    with stack.http() as http:
        response = http.get("/openapi.json")
    assert response.status_code == 200
    return dict(response.json())


def _operations(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{method.upper()} {path}", op) for path, item in spec["paths"].items()
            for method, op in item.items() if method in METHODS]


def test_every_operation_has_a_summary_and_a_description(spec: dict[str, Any]) -> None:
    operations = _operations(spec)
    offenders = [name for name, op in operations
                 if not op.get("summary") or len(op.get("description", "").strip()) < 20]
    assert len(operations) >= 26
    assert offenders == [], f"operations without a summary or description: {offenders}"


def test_every_parameter_has_a_description(spec: dict[str, Any]) -> None:
    offenders = [f"{name}: {param['in']} {param['name']}"
                 for name, op in _operations(spec) for param in op.get("parameters", [])
                 if not param.get("description", "").strip()]
    assert offenders == [], f"parameters without a description: {offenders}"


def test_every_request_and_response_field_has_a_description(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    offenders = [f"{name}.{field}" for name, schema in sorted(schemas.items())
                 for field, prop in schema.get("properties", {}).items()
                 if not prop.get("description", "").strip()]
    assert offenders == [], f"fields without a description: {offenders}"


def test_every_request_body_has_an_example(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]

    def has_example(schema: dict[str, Any]) -> bool:
        if schema.get("examples") or schema.get("example") is not None:
            return True
        if "$ref" in schema:
            return has_example(schemas[schema["$ref"].rsplit("/", 1)[1]])
        options = [s for s in schema.get("anyOf", schema.get("oneOf", []))
                   if s.get("type") != "null"]
        return bool(options) and all(has_example(s) for s in options)

    bodies = [(name, op["requestBody"]) for name, op in _operations(spec)
              if "requestBody" in op]
    offenders = [name for name, body in bodies for media in body["content"].values()
                 if not media.get("examples") and media.get("example") is None
                 and not has_example(media.get("schema", {}))]
    assert len(bodies) >= 8
    assert offenders == [], f"request bodies without an example: {offenders}"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_only_assets_this_server_serves(stack: Stack, page: str) -> None:
    with stack.http() as http:
        html = http.get(page)
        assert html.status_code == 200
        assert html.headers["content-type"].startswith("text/html")
        # Anything the page loads: src/href attributes and the spec URL in its script.
        urls = set(re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html.text))
        urls |= set(re.findall(r"""(?:url|spec-url)\s*[:=]\s*["']([^"']+)["']""", html.text))
        assert "/openapi.json" in urls
        assert re.findall(r"(?:https?:)?//[\w.-]+", html.text) == [], "an absolute URL"
        assert all(url.startswith("/") for url in urls), urls
        answers = {url: http.get(url) for url in sorted(urls)}
    assert {url: r.status_code for url, r in answers.items()} == {url: 200 for url in urls}
    scripts = [url for url in urls if url.endswith(".js")]
    assert scripts and all(len(answers[url].content) > 100_000 for url in scripts), scripts


def test_the_documented_422_is_the_answer_the_server_gives(stack: Stack,
                                                           spec: dict[str, Any]) -> None:
    put = spec["paths"]["/v1/memories/{scope}/{scope_ref}/{key}"]["put"]
    ref = put["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
    documented = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    problem = spec["components"]["schemas"]["ValidationProblem"]
    with stack.http(stack.new_tenant().admin_key) as http:
        answer = http.put("/v1/memories/user/u1/k", json={"importance": 9})
    assert answer.status_code == 422
    body = answer.json()
    assert sorted(body) == sorted(documented["properties"]) == sorted(documented["required"])
    assert body["error"] == documented["properties"]["error"]["const"]
    assert [sorted(e) for e in body["errors"]] == [sorted(problem["properties"])] * 2
