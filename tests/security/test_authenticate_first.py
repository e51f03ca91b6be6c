"""Authenticate before parsing: a request without a valid key is answered 401 before any of
its body is read — the server does not wait for the body it will never use."""

from __future__ import annotations

import json
import re
import socket
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.routing import APIRoute

from control_plane.app import create_app
from control_plane.key_gate import PUBLIC_PATHS, PUBLIC_PREFIXES
from tests.support.service import Stack, Tenant

MISSING = {"error": "unauthorized",
           "detail": "send your API key as 'Authorization: Bearer <key>'"}
NOT_VALID = {"error": "unauthorized",
             "detail": "the API key is not valid; check it or ask an admin for a new one"}
NOT_BEARER = {"error": "unauthorized", "detail": "the Authorization header must be 'Bearer <key>'"}
DECLARED = 9_400_000  # the size of the body the review sent
FIRST_CHUNK = b'{"value": "' + b"x" * 1000


def _send_first_chunk(stack: Stack, headers: dict[str, str], *, chunked: bool = False
                      ) -> tuple[int, dict[str, str], bytes]:
    """Send a PUT declaring a 9.4 MB body, then only its first kilobyte, and read the answer
    without sending more. A server that waits for the body never answers (the socket's
    timeout then fails the test)."""
    url = urlsplit(stack.base_url)
    lines = ["PUT /v1/memories/user/u1/k HTTP/1.1", f"Host: {url.netloc}",
             "Content-Type: application/json",
             *(f"{name}: {value}" for name, value in headers.items())]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {DECLARED}")
    body = (f"{len(FIRST_CHUNK):x}\r\n".encode() + FIRST_CHUNK + b"\r\n") if chunked \
        else FIRST_CHUNK
    with socket.create_connection((url.hostname, url.port), timeout=20) as sock:
        sock.sendall("\r\n".join(lines).encode() + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head, _, rest = answer.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        got = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
        while len(rest) < int(got["content-length"]):
            rest += sock.recv(65536)
    return int(status_line.split()[1]), got, rest


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, MISSING),
    ({"Authorization": "Bearer mp_not_a_real_key"}, NOT_VALID),
    ({"Authorization": "Basic dXNlcjpwYXNz"}, NOT_BEARER),
], ids=["missing", "unknown", "not bearer"])
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_unauthenticated_body_is_not_waited_for(stack: Stack, headers: dict[str, str],
                                                   expected: dict[str, str],
                                                   chunked: bool) -> None:
    status, got, body = _send_first_chunk(stack, headers, chunked=chunked)
    assert status == 401
    assert json.loads(body) == expected
    assert got["connection"] == "close"  # the rest of the body is never read
    assert re.fullmatch(r"[0-9a-f]{32}", got["x-request-id"])


def test_a_revoked_key_is_refused_before_its_body(tenant: Tenant) -> None:
    with tenant.client() as admin:
        created = admin.keys.create(role="agent", name="soon revoked")
        admin.keys.delete(created.id)
    status, _, body = _send_first_chunk(tenant.stack,
                                        {"Authorization": f"Bearer {created.api_key}"})
    assert (status, json.loads(body)) == (401, NOT_VALID)


def test_a_valid_key_still_sends_its_body(tenant: Tenant) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"value": "'
        yield b"y" * 100_000
        yield b'"}'

    with tenant.stack.http(tenant.admin_key) as http:
        written = http.put("/v1/memories/user/u1/streamed", content=chunks(),
                           headers={"content-type": "application/json"})
        read = http.get("/v1/memories/user/u1/streamed")
    assert written.status_code == 200, written.text
    assert read.json()["value"] == "y" * 100_000


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def test_every_route_but_the_public_ones_needs_a_key(stack: Stack) -> None:
    """Each route of the application, called without a key, answers the 401 of a missing
    key — so a new route cannot be reached unauthenticated by mistake — and the public
    ones answer without one."""
    routes = [r for r in create_app(stack.settings).router.routes if isinstance(r, APIRoute)]
    keyed = [(method, _concrete(r.path)) for r in routes for method in sorted(r.methods)
             if r.path not in PUBLIC_PATHS and not r.path.startswith(PUBLIC_PREFIXES)]
    assert len(keyed) > 70
    with httpx.Client(base_url=stack.base_url, timeout=30) as http:
        for method, path in keyed:
            answer = http.request(method, path, content=b'{"value": 1}',
                                  headers={"content-type": "application/json"})
            assert (method, path, answer.status_code, answer.json()) == (
                method, path, 401, MISSING)
        unknown = http.get("/v1/nothing-here")
        public = {path: http.get(path).status_code
                  for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs",
                               "/redoc")}
    assert (unknown.status_code, unknown.json()) == (401, MISSING)
    assert public == dict.fromkeys(public, 200)
