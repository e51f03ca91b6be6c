"""The FastAPI application: routers, lifespan, error rendering."""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import openapi_docs
from .agents.router import router as agents_router
from .audit.router import router as audit_router
from .compactor.router import router as compactor_router
from .compliance.router import router as compliance_router
from .console.router import router as console_router
from .conversations.router import router as conversations_router
from .dlp.router import router as dlp_router
from .embedders.router import router as embedder_router
from .entries.router import router as entries_router
from .errors import DomainError
from .events.router import router as events_router
from .health import reserve_probe_threads
from .health import router as health_router
from .holds.router import router as holds_router
from .integrity.router import router as integrity_router
from .key_gate import check_key
from .keys.router import router as keys_router
from .knowledge.router import router as knowledge_router
from .memories.router import router as memories_router
from .observability.loop_lag import LoopWatch
from .observability.metrics import Metrics
from .observability.request_context import RequestContext
from .remember.router import router as remember_router
from .retention.router import router as retention_router
from .runtime import Runtime
from .search.router import router as search_router
from .seed.router import router as seed_router
from .settings import REQUEST_THREADS, Settings
from .storage_config.router import router as storage_config_router
from .summarizers.router import router as summarizer_router
from .teams.router import router as teams_router
from .tenants.router import router as tenants_router
from .tenants.service import ensure_bootstrap
from .testhooks import pid_header_from_env

log = logging.getLogger(__name__)

_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 406: "not_acceptable", 413: "payload_too_large",
                 415: "unsupported_media_type"}


# FastAPI's OpenTelemetry instrumentation (FastAPI releases that have it), off unless
# MEMPLANE_OTEL_TELEMETRY asks for it.
_NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
_HAS_TELEMETRY = "telemetry" in inspect.signature(FastAPI.__init__).parameters
# Net allocations between two of the collector's young passes while serving (700 by default).
YOUNG_OBJECTS = 10_000


def create_app(settings: Settings | None = None, *, background_process: bool = False,
               host_worker: bool = False) -> FastAPI:
    """The API. With ``background_process`` (``memplane serve``), the background work may
    run in a process of its own (MEMPLANE_BACKGROUND_PROCESS, control_plane.background).
    With ``host_worker`` (a worker of ``memplane serve --workers N``, control_plane.workers)
    the parent has migrated and bootstrapped and runs the background work: the app serves
    requests only, and tells the background process when they use the database."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime(settings)
        # The request threads of synchronous routes, a known number: one tenant's bulkhead
        # takes at most half (settings.REQUEST_THREADS); the probes have their own.
        to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        reserve_probe_threads(app)
        runtime.plane.metrics = app.state.metrics  # storage, jobs, reconcile (observability/)
        app.state.metrics.watch_database(runtime.database_state)
        if host_worker:
            runtime.publish_activity()
        else:
            prepare(runtime)
            if settings.run_background:
                runtime.start_background(separate_process=background_process)
        app.state.runtime = runtime
        # What start-up built (modules, routes, schemas, mappers: ~190,000 objects) lives as
        # long as the process: kept out of the collector's full passes, which walked all of
        # it a few times a minute under load (~50 µs a request, averaged).
        gc.collect()
        gc.freeze()
        # What requests make is mostly freed by its last reference; the collector's young
        # passes, every 700 net allocations by default, walked the in-flight requests' live
        # objects each time, holding the interpreter lock: 39 µs a write served at 16
        # clients (383 passes over 3,656 writes). One every YOUNG_OBJECTS: 10 µs a write
        # (7 passes of ~5 ms), cycles kept a little longer (at most that many objects).
        thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_OBJECTS, *thresholds[1:])
        watch = asyncio.create_task(LoopWatch(app.state.metrics.loop_lag).run())
        try:
            yield
        finally:
            watch.cancel()
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            runtime.close()

    options: dict[str, Any] = {}
    if _HAS_TELEMETRY and not settings.otel_telemetry:
        options["telemetry"] = _NO_TELEMETRY
    app = FastAPI(title="memplane", version="0.1.0", lifespan=lifespan,
                  description="Pointers in the control plane; content in your own bucket.",
                  docs_url=None, redoc_url=None, **options)
    _install_offline_docs(app)
    openapi_docs.install(app)
    app.state.metrics = Metrics()
    # One place for the request body policy (size, JSON content type, nesting depth), the
    # /metrics token and the API key, checked before any body is read; routes never check
    # these themselves (their dependencies still check roles).
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    app.add_middleware(RequestContext, metrics=app.state.metrics,
                       max_body_bytes=settings.max_body_bytes, metrics_token=token,
                       gate=check_key, slow_seconds=settings.slow_request_seconds)
    if (hook := pid_header_from_env()) is not None:  # tests of several workers only
        app.add_middleware(hook)
    _add_routes(app, ROUTERS)
    _install_error_handlers(app)
    return app


def prepare(runtime: Runtime) -> None:
    """What a server does once before it serves: the embedded default's migrations, and the
    default tenant on a first start (its admin key printed once, or written to
    MEMPLANE_BOOTSTRAP_KEY_FILE). ``memplane serve --workers N`` does it in the parent."""
    settings = runtime.settings
    if settings.embedded:
        runtime.migrate()
    if settings.create_default_tenant:
        with runtime.sessions() as session:
            admin = settings.admin_key.get_secret_value() if settings.admin_key else None
            new_key = ensure_bootstrap(session, admin, key_file=settings.bootstrap_key_file)
        if new_key and settings.bootstrap_key_file:
            log.warning("created the default tenant; its admin key is in %s (mode 0600)",
                        settings.bootstrap_key_file)
        elif new_key:
            print(f"\nmemplane: created the default tenant. Its admin key, shown once:\n\n"
                  f"    {new_key}\n\nKeep it safe; it can create tenants and keys.\n",
                  file=sys.stderr, flush=True)


# What agents call every turn first: a request's route is found by trying the routes in
# order, and no two routes of different routers match the same request
# (tests/api/test_routing.py), so this order only decides how soon each is found.
ROUTERS = (memories_router, search_router, events_router, entries_router, conversations_router,
           knowledge_router, health_router, audit_router, tenants_router, storage_config_router,
           compliance_router, keys_router, integrity_router, seed_router, summarizer_router,
           compactor_router, agents_router, embedder_router, retention_router, holds_router,
           teams_router, remember_router, dlp_router, console_router)


def _add_routes(app: FastAPI, routers: tuple[APIRouter, ...]) -> None:
    """The routers' routes as the application's own, ahead of the documentation routes.

    ``include_router`` (FastAPI 0.16x) keeps each router as a nested router that a request
    is matched through, at ~10 us per router passed and ~2 us per route: 40-360 us of the
    event loop per request depending on the route (a served verified get costs ~1 ms of
    CPU in all). The routes themselves are complete as their router made them (path, tags,
    responses); none of the routers has a prefix or dependencies of its own to pass on."""
    docs = list(app.router.routes)  # the OpenAPI document, /docs, /redoc and their assets
    app.router.routes.clear()
    for router in routers:
        if router.prefix or router.dependencies:
            raise ValueError("a router with a prefix or dependencies needs include_router")
        app.router.routes.extend(router.routes)
    app.router.routes.extend(docs)


DOCS_ASSETS = "/docs-assets"


def _install_offline_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc with their scripts and styles served by this server from
    the ``fastapi-offline`` package, so the pages work without reaching a CDN."""
    from fastapi.openapi.docs import (
        get_redoc_html,
        get_swagger_ui_html,
        get_swagger_ui_oauth2_redirect_html,
    )
    from fastapi.staticfiles import StaticFiles
    from starlette.responses import HTMLResponse

    try:
        assets = resources.files("fastapi_offline") / "static"
    except ModuleNotFoundError:  # an install without the base dependencies: CDN pages
        log.warning("fastapi-offline is not installed; /docs and /redoc load from a CDN")
        local = False
    else:
        app.mount(DOCS_ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")
        local = True
    oauth2_redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        spec, redirect = f"{root}{app.openapi_url}", f"{root}{oauth2_redirect}"
        title = f"{app.title} - API"
        if not local:
            return get_swagger_ui_html(openapi_url=spec, title=title,
                                       oauth2_redirect_url=redirect)
        return get_swagger_ui_html(
            openapi_url=spec, title=title, oauth2_redirect_url=redirect,
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png")

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        spec, title = f"{root}{app.openapi_url}", f"{app.title} - API"
        if not local:
            return get_redoc_html(openapi_url=spec, title=title)
        return get_redoc_html(openapi_url=spec, title=title, with_google_fonts=False,
                              redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png")


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        return JSONResponse({"error": "validation_error", "detail": describe_errors(errors),
                             "errors": [_plain(e) for e in errors]}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "error")
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = "no such endpoint; see /docs for the API"
        return JSONResponse({"error": code, "detail": detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(sa_exc.OperationalError)
    async def database_down(_: Request, exc: sa_exc.OperationalError) -> JSONResponse:
        log.error("database error: %s", type(exc.orig).__name__)
        return JSONResponse({"error": "database_unavailable",
                             "detail": "the control-plane database is unreachable; retry later"},
                            status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(sa_exc.DataError)
    async def unstorable_value(_: Request, exc: sa_exc.DataError) -> JSONResponse:
        # The last line of defence: input checks refuse such values first (a NUL in text,
        # a number out of a column's range); the database's message may quote the value.
        log.error("database refused a value: %s", type(exc.orig).__name__)
        return JSONResponse({"error": "validation_error",
                             "detail": "a value in the request cannot be stored (control "
                                       "characters such as NUL, or a number out of range); "
                                       "fix the value and retry"}, status_code=422)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse({"error": "internal_error",
                             "detail": "the server failed; the request id identifies the log"},
                            status_code=500)


def describe_errors(errors: Any) -> str:
    """One sentence per problem, naming where it is: 'body.value: Field required'."""
    sentences = []
    for error in errors:
        where = ".".join(str(part) for part in error.get("loc", ()))
        if error.get("type") == "json_invalid":
            ctx = error.get("ctx") or {}
            reason = ctx.get("error", "parse error")
            sentences.append(f"the request body is not valid JSON ({reason})")
        elif error.get("type") == "missing" and where.startswith("body"):
            sentences.append(f"{where}: this field is required")
        else:
            sentences.append(f"{where}: {error.get('msg')}")
    return "; ".join(sentences)


def _plain(error: dict[str, Any]) -> dict[str, Any]:
    return {"loc": list(error.get("loc", ())), "type": error.get("type"), "msg": error.get("msg")}
