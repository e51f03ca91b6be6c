"""Request ids, JSON logs, Prometheus metrics, the body-size limit — as pure ASGI middleware."""

from __future__ import annotations

import functools
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any
from urllib.parse import unquote

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from storage_adapters.entropy import token_bytes

from .kit import request_id_var

access_log = logging.getLogger("memplane.access")
log = logging.getLogger(__name__)
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
        # Calls to tenants' buckets and the default bucket (storage_adapters wrapped by
        # ``InstrumentedAdapter``): latency per backend and operation, failures by kind.
        self.storage_latency = Histogram(
            "memplane_storage_operation_duration_seconds",
            "Time one storage call took (a listing: until it was read to its end)",
            ["backend", "operation"], registry=self.registry,
            buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.storage_errors = Counter(
            "memplane_storage_errors", "Storage calls that failed, by problem "
            "(not_found, exists, integrity, unreachable, auth_failed, permission_denied, "
            "bucket_not_found, endpoint_not_allowed, other)",
            ["backend", "operation", "problem"], registry=self.registry)
        self.storage_refused = Counter(
            "memplane_storage_refused", "Calls to a tenant's own bucket refused unsent "
            "because that tenant's bulkhead was full (plane/bulkhead.py)",
            ["backend"], registry=self.registry)
        # Compliance jobs run by a worker in this process (jobs/worker.py).
        self.job_duration = Histogram(
            "memplane_job_duration_seconds", "Time one attempt at a job took, by outcome "
            "(completed, failed, retried, taken_over, abandoned)", ["kind", "outcome"],
            registry=self.registry,
            buckets=(.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600))
        # Reconciler and orphan GC runs in this process (memories/reconcile.py); a
        # `memplane reconcile` CronJob prints its own counts, and the database gauges
        # (memplane_pointers_*, memplane_gc_candidates) show what is left to do.
        self.reconcile_actions = Counter(
            "memplane_reconcile_actions", "Pointers the reconciler settled, by action "
            "(write_completed, write_rolled_back, delete_completed)", ["action"],
            registry=self.registry)
        self.gc_objects = Counter(
            "memplane_gc_objects", "Objects the orphan GC handled, by outcome (marked, "
            "deleted, rescued)", ["outcome"], registry=self.registry)
        self._database = _DatabaseGauges()
        self.registry.register(self._database)

    def watch_database(self, read: Callable[[], DatabaseState]) -> None:
        """Report queue depth, audit sealing lag, unsettled pointers and GC candidates from
        ``read`` at each scrape: the database's view, true whichever process runs the jobs,
        the sealer or the reconciler."""
        self._database.read = read


class DatabaseState:
    """What the database says at one scrape (see ``Runtime.database_state``)."""

    __slots__ = ("jobs", "unsealed_oldest_age", "unsealed_rows", "pointers",
                 "pending_oldest_age", "gc_candidates")

    def __init__(self, *, jobs: Iterable[tuple[str, str, int]], unsealed_oldest_age: float,
                 unsealed_rows: int, pointers: Iterable[tuple[str, int]],
                 pending_oldest_age: float, gc_candidates: int) -> None:
        self.jobs = list(jobs)
        self.unsealed_oldest_age = unsealed_oldest_age
        self.unsealed_rows = unsealed_rows
        self.pointers = dict(pointers)
        self.pending_oldest_age = pending_oldest_age
        self.gc_candidates = gc_candidates


UNSETTLED_STATES = ("pending_write", "pending_delete", "corrupt")


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, documentation)
    gauge.add_metric([], value)
    return gauge


class _DatabaseGauges(Collector):
    def __init__(self) -> None:
        self.read: Callable[[], DatabaseState] | None = None

    def describe(self) -> Iterable[Any]:
        return []  # read at scrape time only; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        if self.read is None:
            return
        up = "memplane_database_metrics_up"
        about_up = "Whether /metrics could read the gauges below from the database"
        try:
            now = self.read()
        except Exception as exc:  # a scrape must answer even when the database does not
            log.warning("could not read the database for /metrics: %s", type(exc).__name__)
            yield _gauge(up, about_up, 0)
            return
        yield _gauge(up, about_up, 1)
        jobs = GaugeMetricFamily("memplane_jobs", "Compliance jobs waiting or running, by "
                                 "kind and state (queued, running)", labels=["kind", "state"])
        for kind, job_state, count in now.jobs:
            jobs.add_metric([kind, job_state], count)
        yield jobs
        yield _gauge("memplane_audit_unsealed_oldest_age_seconds",
                     "Age of the oldest audit row the sealer has not chained yet (0 when "
                     "every row is sealed)", now.unsealed_oldest_age)
        yield _gauge("memplane_audit_unsealed_rows", "Audit rows the sealer has not chained yet",
                     now.unsealed_rows)
        pointers = GaugeMetricFamily(
            "memplane_pointers_unsettled", "Memory pointers a write or delete left pending "
            "(the reconciler settles them) or marked corrupt (never served)",
            labels=["sync_status"])
        for status in UNSETTLED_STATES:
            pointers.add_metric([status], now.pointers.get(status, 0))
        yield pointers
        yield _gauge("memplane_pointers_pending_oldest_age_seconds",
                     "Age of the oldest pending pointer (0 when none): far past "
                     "MEMPLANE_RECONCILE_GRACE_SECONDS means reconcile is not running",
                     now.pending_oldest_age)
        yield _gauge("memplane_gc_candidates", "Unnamed objects marked by orphan GC, waiting "
                     "for the sweep a grace period later", now.gc_candidates)


def serve_metrics(metrics: Metrics, host: str, port: int,
                  token: str | None = None) -> Callable[[], None]:
    """Serve ``metrics`` at ``http://host:port/metrics`` from a daemon thread, for processes
    without the API (``memplane worker --metrics-port``); with ``token`` it needs
    ``Authorization: Bearer <token>`` like the API's /metrics. Returns the function that
    stops it."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from prometheus_client import make_wsgi_app

    exposition = make_wsgi_app(metrics.registry)
    expected = f"Bearer {token}".encode() if token else None

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"only /metrics is served here\n"]
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1")
        if expected is not None and not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("Content-Type", "text/plain"),
                                                ("WWW-Authenticate", "Bearer")])
            return [b"send the metrics token as 'Authorization: Bearer <token>' "
                    b"(MEMPLANE_METRICS_TOKEN)\n"]
        return exposition(environ, start_response)

    class _Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

    class _Threaded(WSGIServer):
        daemon_threads = True

    server = make_server(host, port, app, server_class=_Threaded, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, name="memplane-metrics",
                              daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    return stop


def _storage_problem(exc: BaseException) -> str:
    from storage_adapters import base as storage

    if isinstance(exc, storage.ObjectNotFound):
        return "not_found"
    if isinstance(exc, storage.ObjectExists):
        return "exists"
    if isinstance(exc, storage.IntegrityError):
        return "integrity"
    if isinstance(exc, storage.StorageError):
        return storage.problem_code(exc)
    return "other"


class InstrumentedAdapter:
    """A storage adapter whose calls are timed and whose failures are counted per backend.

    The label children are looked up once, here, so a call costs two ``perf_counter`` reads
    and one histogram observation. The streaming calls (``put_file``, ``iter_chunks``) and
    ``put_many`` are timed too and exist only when the wrapped adapter has them; anything
    else is the wrapped adapter's own.
    """

    _TIMED = ("put", "get", "head", "delete_many", "purge_versions", "describe",
              "health_check")

    def __init__(self, inner: Any, backend: str, metrics: Metrics) -> None:
        self.inner = inner
        self.backend = backend
        self._metrics = metrics
        self._observe = {op: metrics.storage_latency.labels(backend, op).observe
                         for op in (*self._TIMED, "list", "list_versions", "put_file",
                                    "iter_chunks", "put_many")}

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        found = getattr(self.inner, name)
        if name == "put_file":
            return functools.partial(self._call, name)
        if name == "iter_chunks":
            return functools.partial(self._listing, name)
        if name == "put_many":
            return self._put_many
        return found

    def _put_many(self, items: Any) -> list[Any]:
        answers: list[Any] = self._call("put_many", items)
        for answer in answers:  # each object that failed counts as a failure
            if answer is not None:
                self._failed("put_many", answer)
        return answers

    def _failed(self, operation: str, exc: BaseException) -> None:
        self._metrics.storage_errors.labels(self.backend, operation,
                                            _storage_problem(exc)).inc()

    def _call(self, operation: str, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return getattr(self.inner, operation)(*args)
        except BaseException as exc:
            self._failed(operation, exc)
            raise
        finally:
            self._observe[operation](time.perf_counter() - started)

    def _listing(self, operation: str, *args: Any) -> Iterator[Any]:
        started = time.perf_counter()
        try:
            yield from getattr(self.inner, operation)(*args)
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._failed(operation, exc)
            raise
        finally:
            self._observe[operation](time.perf_counter() - started)

    def put(self, path: str, data: bytes) -> None:
        self._call("put", path, data)

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        return self._call("get", path, max_bytes)  # type: ignore[no-any-return]

    def head(self, path: str) -> Any:
        return self._call("head", path)

    def delete_many(self, paths: Iterable[str]) -> int:
        return self._call("delete_many", paths)  # type: ignore[no-any-return]

    def purge_versions(self, prefix: str) -> int:
        return self._call("purge_versions", prefix)  # type: ignore[no-any-return]

    def describe(self) -> Any:
        return self._call("describe")

    def health_check(self) -> Any:
        return self._call("health_check")

    def list(self, prefix: str) -> Iterator[Any]:
        return self._listing("list", prefix)

    def list_versions(self, prefix: str) -> Iterator[Any]:
        return self._listing("list_versions", prefix)

    def close(self) -> None:
        self.inner.close()


def backend_name(adapter: Any) -> str:
    """``s3``, ``gcs``, ``azure``, ``local`` or ``memory`` from the adapter's class."""
    return type(adapter).__name__.removesuffix("Adapter").lower()


# Request bodies may nest JSON this deep at most (a memory value inside its body one level
# less). Deeper input is refused with 422 before anything parses it: the JSON parser, the
# validator and the serialiser all recurse, and the serialiser gives up at 255 levels.
MAX_JSON_DEPTH = 64
# A string with its escapes; an unterminated one runs to the end, so every match attempt
# succeeds and cutting strings out stays linear however the body is malformed.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_CHECK_INLINE_BYTES = 256 * 1024
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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
                 metrics_token: str | None = None, gate: Gate | None = None) -> None:
        self.app = app
        self.gate = gate  # checks the API key before the body is read (key_gate.py)
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self._metrics_token = metrics_token.encode() if metrics_token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path")
        if raw_path:
            parts = _KEEP_ENCODED.split(raw_path.decode("latin-1").split("?", 1)[0])
            scope["path"] = "".join(p if i % 2 else unquote(p) for i, p in enumerate(parts))
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_REQUEST_ID.match(incoming) \
            else token_bytes(16).hex()
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
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
            await self.app(scope, receive, send_wrapper)
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
        deep = (_nests_deeper(body, MAX_JSON_DEPTH) if len(body) < _CHECK_INLINE_BYTES
                else await run_in_threadpool(_nests_deeper, body, MAX_JSON_DEPTH))
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
                  headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"error": code, "detail": detail}).encode()
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


def _nests_deeper(body: bytes, limit: int) -> bool:
    """Whether JSON ``body`` nests arrays/objects more than ``limit`` levels deep.

    Cheap, all at C speed: a body with no more brackets than the limit cannot; otherwise the
    strings are cut out, the brackets kept (``{}`` counted as ``[]``) and the innermost pairs
    removed, one level per pass: a body that is empty within ``limit`` passes is shallow
    enough. A pass that removes nothing means malformed JSON, left for the parser to describe.
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    # Without escapes, quotes alternate opening and closing strings: the outside is the rest.
    outside = (b"".join(body.split(b'"')[0::2]) if b"\\" not in body
               else _JSON_STRING.sub(b"", body))
    rest = outside.translate(_AS_SQUARE, _NOT_BRACKETS)
    for _ in range(limit):
        shorter = rest.replace(b"[]", b"")
        if not shorter:
            return False
        if len(shorter) == len(rest):
            return False
        rest = shorter
    return True


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
    """JSON lines at ``level``; client libraries capped and credentials redacted
    (log_guard.py) whatever the level."""
    from .log_guard import guard

    handler = guard(logging.StreamHandler())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
