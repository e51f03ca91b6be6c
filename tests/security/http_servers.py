"""Tiny local HTTP servers for the SSRF and credential tests.

:class:`Recorder` answers every request with a fixed response and remembers what it got;
``mode`` switches it between answering itself and forwarding to a real emulator, so a bucket
can be configured through it and then turn hostile; ``'hold'`` forwards everything but keeps
each GET open (a bucket that stopped answering reads) until ``release`` is set.
"""

from __future__ import annotations

import http.client
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.support.quiet_server import QuietHTTPServer


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Recorder:
    """An HTTP server on ``host`` (any of 127.0.0.0/8) answering ``status``/``body`` to every
    request, or forwarding to ``forward_to`` while ``mode == 'forward'``."""

    def __init__(self, host: str = "127.0.0.1", *, status: int = 200, body: bytes = b"",
                 headers: dict[str, str] | None = None, forward_to: str | None = None) -> None:
        self.hits: list[Hit] = []
        self.status, self.body = status, body
        self.headers = headers or {}
        self.forward_to = forward_to
        self.mode = "forward" if forward_to else "answer"
        # mode 'hold': the paths of the GETs being held now, and what lets them go
        self.held: list[str] = []
        self.release = threading.Event()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.hits.append(Hit(self.command, self.path, dict(self.headers), body))
                if recorder.mode == "hold" and self.command == "GET":
                    recorder.held.append(self.path)
                    try:
                        recorder.release.wait(timeout=120)
                    finally:
                        recorder.held.remove(self.path)
                if recorder.mode in ("forward", "hold") and recorder.forward_to:
                    status, headers, answer = _forward(recorder.forward_to, self.command,
                                                       self.path, dict(self.headers), body)
                else:
                    status, headers, answer = recorder.status, recorder.headers, recorder.body
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding",
                                            "connection", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = QuietHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.server.server_address[0]}:{self.port}"

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def _forward(target: str, method: str, path: str, headers: dict[str, str],
             body: bytes) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(target)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()
