"""A local HTTP/1.1 server whose every request goes to one function, for the tests' stand-ins
(hostile buckets, endpoints that record or forward), with the two things most of them do:
forward a request to a real emulator, and send an answer.

Subclass :class:`LocalHTTPServer` and write ``handle(handler, body)``; use it as a context
manager (started on entry, stopped on exit, ``url`` once built).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.support.quiet_server import QuietHTTPServer

# Headers that belong to one connection, never copied from a forwarded answer.
HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "date", "server",
                        "keep-alive"})


class LocalHTTPServer:
    """An HTTP/1.1 server on ``host`` (any of 127.0.0.0/8), port chosen by the system."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server.handle(self, self.rfile.read(length) if length else b"")

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = QuietHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        """Answer one request (its body already read)."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.server.server_address[0]}:{self.port}"

    def stopping(self) -> None:
        """Called first on exit: let go of whatever requests are being held."""

    def __enter__(self) -> Any:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def forward(target: str, method: str, path: str, headers: Mapping[str, str], body: bytes,
            *, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Send the request to ``target`` (an emulator's URL) and return its whole answer."""
    parts = urlsplit(target)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                      timeout=timeout)
    try:
        conn.request(method, path, body=body or None, headers=dict(headers))
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def answer(handler: BaseHTTPRequestHandler, status: int, headers: Mapping[str, str],
           body: bytes) -> None:
    """Send ``status``, the end-to-end ``headers`` and ``body`` with its length (no body to a
    HEAD)."""
    handler.send_response(status)
    for name, value in headers.items():
        if name.lower() not in HOP_BY_HOP:
            handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)
