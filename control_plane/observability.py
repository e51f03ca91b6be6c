"""Request ids, JSON logs, Prometheus metrics, the body-size limit — as pure ASGI middleware."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any
from urllib.parse import unquote

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .kit import request_id_var

access_log = logging.getLogger("memplane.access")
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_KEEP_ENCODED = re.compile(r"(%2[fF]|%25)")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("memplane_http_requests", "HTTP requests handled",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("memplane_http_request_duration_seconds",
                                 "Time to answer an HTTP request", ["method", "route"],
                                 registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1,
                                          2.5, 5, 10))


class BodyTooLarge(Exception):
    pass


class RequestContext:
    """Request id, access log, metrics, body limit and path decoding for every request.

    Paths are decoded here except ``%2F`` and ``%25``, so a key or scope ref that holds a
    ``/`` still arrives as one path segment; the memories router decodes the rest.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path")
        if raw_path:
            parts = _KEEP_ENCODED.split(raw_path.decode("latin-1").split("?", 1)[0])
            scope["path"] = "".join(p if i % 2 else unquote(p) for i, p in enumerate(parts))
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"],
                                      (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            length = _header(scope, b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                await self._too_large(send_wrapper)
                return
            await self.app(scope, self._limited(receive), send_wrapper)
        except BodyTooLarge:
            if not response_started:
                await self._too_large(send_wrapper)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope.get("method", "")
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(elapsed)
            access_log.info("request", extra={
                "method": method, "route": template, "status": status,
                "duration_ms": round(elapsed * 1000, 2),
            })
            request_id_var.reset(token)

    def _limited(self, receive: Receive) -> Receive:
        seen = 0

        async def wrapped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise BodyTooLarge
            return message

        return wrapped

    async def _too_large(self, send: Send) -> None:
        body = json.dumps({
            "error": "payload_too_large",
            "detail": f"the request body is larger than {self.max_body_bytes} bytes; "
                      "store large content in smaller memories",
        }).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the request id. Never log memory content here."""

    _std = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id_var.get(),
        }
        payload.update({k: v for k, v in record.__dict__.items() if k not in self._std})
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
