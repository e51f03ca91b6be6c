"""Tiny local HTTP servers for the SSRF and credential tests.

:class:`Recorder` answers every request with a fixed response and remembers what it got;
``mode`` switches it between answering itself and forwarding to a real emulator, so a bucket
can be configured through it and then turn hostile; ``'hold'`` forwards everything but keeps
each GET open (a bucket that stopped answering reads) until ``release`` is set.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from tests.support.emulators import MotoServer
from tests.support.local_http import LocalHTTPServer, answer, forward
from tests.support.service import Tenant


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Recorder(LocalHTTPServer):
    """An HTTP server on ``host`` (any of 127.0.0.0/8) answering ``status``/``body`` to every
    request, or forwarding to ``forward_to`` while ``mode == 'forward'``."""

    def __init__(self, host: str = "127.0.0.1", *, status: int = 200, body: bytes = b"",
                 headers: dict[str, str] | None = None, forward_to: str | None = None) -> None:
        super().__init__(host)
        self.hits: list[Hit] = []
        self.status, self.body = status, body
        self.headers = headers or {}
        self.forward_to = forward_to
        self.mode = "forward" if forward_to else "answer"
        # mode 'hold': the paths of the GETs being held now, and what lets them go
        self.held: list[str] = []
        self.release = threading.Event()

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        self.hits.append(Hit(handler.command, handler.path, dict(handler.headers), body))
        if self.mode == "hold" and handler.command == "GET":
            self.held.append(handler.path)
            try:
                self.release.wait(timeout=120)
            finally:
                self.held.remove(handler.path)
        if self.mode in ("forward", "hold") and self.forward_to:
            answer(handler, *forward(self.forward_to, handler.command, handler.path,
                                     dict(handler.headers), body))
        else:
            answer(handler, self.status, self.headers, self.body)

    def stopping(self) -> None:
        self.release.set()


def bucket_through(tenant: Tenant, moto: MotoServer, endpoint: str) -> None:
    """Give ``tenant`` a new moto bucket of its own, reached through ``endpoint`` (a stand-in
    in front of moto that can turn hostile later)."""
    bucket = f"own-{uuid.uuid4().hex[:12]}"
    moto.create_bucket(bucket)
    config = {**moto.config(bucket), "endpoint_url": endpoint}
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.put("/v1/storage/config",
                          json={"storage_type": "s3", "connection_config": config})
        assert answer.status_code == 200, answer.text
