"""Request ids, the access log, HTTP metrics, path decoding and the request body policy —
as pure ASGI middleware."""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage_adapters.entropy import token_bytes

from ..kit import request_id_var
from .json_depth import MAX_JSON_DEPTH, nests_deeper
from .metrics import Metrics

access_log = logging.getLogger("memplane.access")
error_log = logging.getLogger("control_plane.app")
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_KEEP_ENCODED = re.compile(r"(%2[fF]|%25)")
_CHECK_INLINE_BYTES = 256 * 1024
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SERIES_KEPT = 10_000  # past this (methods made up by clients), labels() is asked each time


class RequestContext:
    """Request id, access log, metrics, path decoding and the request body policy.

    Paths are decoded here except ``%2F`` and ``%25``, so a key or scope ref that holds a
    ``/`` still arrives as one path segment; the memories router decodes the rest.

    The body policy is enforced here, once, for every route: a body is read in full before
    the route runs (declared length or chunked), so one over ``max_body_bytes`` is refused
    with 413 however it is sent; a body must be JSON (``Content-Type: application/json``,
    else 415) and nest at most :data:`MAX_JSON_DEPTH` levels (else 422). ``/metrics`` needs
    ``Authorization: Bearer <metrics token>`` when a token is configured.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body_bytes: int,
                 metrics_token: str | None = None, gate: Gate | None = None,
                 slow_seconds: float = 5.0) -> None:
        self.app = app
        self.slow_seconds = slow_seconds
        self.gate = gate  # checks the API key before the body is read (key_gate.py)
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self._metrics_token = metrics_token.encode() if metrics_token else None
        self._by_labels: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path")
        if raw_path:
            path = raw_path.decode("latin-1").split("?", 1)[0]
            if b"%" in raw_path:  # else nothing to decode (what the server made of it too)
                parts = _KEEP_ENCODED.split(path)
                path = "".join(p if i % 2 else unquote(p) for i, p in enumerate(parts))
            scope["path"] = path
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_REQUEST_ID.match(incoming) \
            else token_bytes(16).hex()
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        answered = False

        async def send_wrapper(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                status, answered = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"],
                                      (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            refusal = self._refuse_metrics(scope)
            if refusal is None and self.gate is not None:
                refusal = await self.gate(scope)
                if refusal is not None and _may_have_body(scope):  # never read, not waited for
                    refusal = (*refusal[:3], [*refusal[3], (b"connection", b"close")])
            if refusal is None and _may_have_body(scope):
                body, refusal = await self._read_body(scope, receive)
                if refusal is None:
                    receive = _replay(body, receive)
            if refusal is not None:
                await _answer(send_wrapper, *refusal)
                return
            try:
                await self.app(scope, receive, send_wrapper)
            except Exception:
                # Logged here, while the request id is set, so the 500's id finds this line.
                error_log.exception("unhandled error")
                if answered:
                    raise
                await _answer(send_wrapper, 500, "internal_error",
                              f"the server failed; the log lines of request {request_id} say "
                              "why (quote it when reporting the failure)", [],
                              request_id=request_id)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope.get("method", "")
            count, latency = self._series(method, template, status)
            count.inc()
            latency.observe(elapsed)
            if elapsed >= self.slow_seconds:  # at the default level, with the request id
                access_log.warning("slow request", extra=self._fields(
                    method, template, status, elapsed))
            elif access_log.isEnabledFor(logging.INFO):
                access_log.info("request", extra=self._fields(method, template, status, elapsed))
            request_id_var.reset(token)

    @staticmethod
    def _fields(method: str, template: str, status: int, elapsed: float) -> dict[str, Any]:
        return {"method": method, "route": template, "status": status,
                "duration_ms": round(elapsed * 1000, 2)}

    def _series(self, method: str, template: str, status: int) -> tuple[Any, Any]:
        """The request counter's and latency histogram's series of a method, route and
        status, kept (``labels()`` checks its arguments and takes a lock on every call). As
        many as prometheus-client keeps itself: one per combination seen."""
        key = (method, template, status)
        series = self._by_labels.get(key)
        if series is None:
            series = (self.metrics.requests.labels(method, template, str(status)),
                      self.metrics.latency.labels(method, template))
            if len(self._by_labels) < _SERIES_KEPT:
                self._by_labels[key] = series
        return series

    def _refuse_metrics(self, scope: Scope) -> _Refusal | None:
        if self._metrics_token is None or scope.get("path") != "/metrics":
            return None
        given = (_header(scope, b"authorization") or "").encode("latin-1")
        expected = b"Bearer " + self._metrics_token
        if hmac.compare_digest(given, expected):
            return None
        return (401, "unauthorized", "this server protects /metrics: send its metrics token as "
                "'Authorization: Bearer <token>' (MEMPLANE_METRICS_TOKEN)",
                [(b"www-authenticate", b"Bearer")])

    async def _read_body(self, scope: Scope, receive: Receive) -> tuple[bytes, _Refusal | None]:
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return b"", self._too_large()
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return b"", (400, "bad_request", "the client closed the connection before "
                             "sending the whole body", [])
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body_bytes:
                return b"", self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if not body:
            return body, None
        content_type = _header(scope, b"content-type")
        if not _is_json(content_type):
            said = f"'{content_type[:100]}'" if content_type else "no Content-Type"
            return body, (415, "unsupported_media_type",
                          f"the request body was sent with {said}; send JSON with "
                          "'Content-Type: application/json'", [])
        # A large body is checked off the event loop (it costs less than parsing it).
        deep = (nests_deeper(body, MAX_JSON_DEPTH) if len(body) < _CHECK_INLINE_BYTES
                else await run_in_threadpool(nests_deeper, body, MAX_JSON_DEPTH))
        if deep:
            return body, (422, "validation_error",
                          f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep; "
                          "flatten the value (or store deep structures as a JSON string)", [])
        return body, None

    def _too_large(self) -> _Refusal:
        return (413, "payload_too_large",
                f"the request body is larger than {self.max_body_bytes} bytes; "
                "store large content in smaller memories", [(b"connection", b"close")])


_Refusal = tuple[int, str, str, list[tuple[bytes, bytes]]]
Gate = Callable[[Scope], Awaitable[_Refusal | None]]


async def _answer(send: Send, status: int, code: str, detail: str,
                  headers: list[tuple[bytes, bytes]], request_id: str | None = None) -> None:
    answer = {"error": code, "detail": detail}
    if request_id is not None:
        answer["request_id"] = request_id
    body = json.dumps(answer).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def _may_have_body(scope: Scope) -> bool:
    if scope.get("method") in _BODY_METHODS:
        return True
    length = _header(scope, b"content-length")
    return bool(length and length != "0") or _header(scope, b"transfer-encoding") is not None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read by the policy, once; then the client's own messages (disconnects)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))



def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None
