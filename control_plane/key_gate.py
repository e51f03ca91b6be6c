"""Authenticate before parsing: a request's API key is checked before any of its body is read.

FastAPI reads and parses a body before it resolves a route's dependencies, so a key checked
there comes after the work an unauthenticated caller should never get: a 10 MB body read and
parsed for a 401. The gate runs in the request middleware (``RequestContext``), after the
request id is set and before the body policy reads a byte: every path but the public ones
(:data:`PUBLIC_PATHS`, :data:`PUBLIC_PREFIXES`) needs a valid key, found by the same lookup
the dependencies use (:func:`control_plane.deps.find_caller`, with its cache). A missing,
malformed, unknown or revoked key is answered here with the same 401 the dependency gives;
the caller found is left in the request's scope, where ``get_caller`` and ``call_of`` take it
instead of looking the key up again. Roles are still checked (and refusals audited) by the
route's dependency: the gate only says who is calling.
"""

from __future__ import annotations

import logging

from sqlalchemy import exc as sa_exc
from starlette.types import Scope

from .deps import CALLER_IN_SCOPE, find_caller
from .errors import Unauthorized

log = logging.getLogger(__name__)

# What answers without an API key: probes, metrics (its own token, checked by RequestContext)
# and the API's documentation.
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs",
                          "/docs/oauth2-redirect", "/redoc", "/console"})
PUBLIC_PREFIXES = ("/docs-assets/", "/console/")  # the console's files: it asks for a key

Refusal = tuple[int, str, str, list[tuple[bytes, bytes]]]


async def check_key(scope: Scope) -> Refusal | None:
    """None when the request may go on (a public path, or a valid key: its caller is then in
    ``scope[CALLER_IN_SCOPE]``); else the answer to give without reading the body."""
    path: str = scope.get("path", "")
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
        return None
    authorization = _header(scope, b"authorization")
    try:
        scope[CALLER_IN_SCOPE] = await find_caller(scope["app"].state.runtime, authorization)
    except Unauthorized as refused:
        return (refused.status_code, refused.code, refused.detail, [])
    except sa_exc.OperationalError as exc:
        # As app.py answers a database outage inside a route (the handlers there run after
        # this middleware, so the answer is given here).
        log.error("database error: %s", type(exc.orig).__name__)
        return (503, "database_unavailable",
                "the control-plane database is unreachable; retry later",
                [(b"retry-after", b"5")])
    return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None
