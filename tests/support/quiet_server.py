"""A threading HTTP server for test stubs that does not print a traceback when a client
hangs up mid-request (memplane's guards close connections on purpose); any other error in
a handler is still printed."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
