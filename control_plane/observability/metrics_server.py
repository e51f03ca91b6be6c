"""/metrics served apart from the API, for processes without one (the worker)."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from .metrics import Metrics


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
