"""Routes whose plain requests skip FastAPI's parameter solving.

For each request FastAPI solves a route's parameters on the event loop: it looks at every
declared parameter's annotation again (is it a sequence? which alias?), validates each value
through pydantic and builds the error list — ~50 µs of a served verified read's event loop for
three path parameters and one query flag, about as much as the rest of the route's dispatch.
A route made with :func:`plain_route` first asks its ``parse`` for the values of a plain
request (path segments already matched by the router, a query string among the few it knows):
when ``parse`` answers, the endpoint runs in the thread pool with them at once; when it
answers None (anything unusual: an unknown scope, another query string), FastAPI's own
handler takes the request, so every refusal (422 and its sentence) is FastAPI's, as before.
The route, its OpenAPI operation and its answers are FastAPI's; only the way to the endpoint
is shorter. With FastAPI's OpenTelemetry instrumentation on, every request takes FastAPI's
way (its spans are made there).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool


def _no_telemetry() -> Any:
    return None


_telemetry: Callable[[], Any] = _no_telemetry
try:  # FastAPI's OpenTelemetry data of the request: None unless instrumentation is on
    from fastapi.telemetry import get_telemetry_data as _telemetry
except ImportError:  # a FastAPI release without instrumentation
    pass

Parse = Callable[[Request], dict[str, Any] | None]


class _PlainParams(APIRoute):
    parse: ClassVar[Parse]

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        standard = super().get_route_handler()
        endpoint, parse = self.endpoint, type(self).parse

        async def handler(request: Request) -> Response:
            values = parse(request) if _telemetry() is None else None
            if values is None:
                return await standard(request)
            answer: Response = await run_in_threadpool(endpoint, request=request, **values)
            return answer

        return handler


def plain_route(parse: Parse) -> type[APIRoute]:
    """The route class (``add_api_route(..., route_class_override=...)``) of a sync endpoint
    that takes ``request`` and answers a Response, whose plain requests' parameters ``parse``
    gives (or None: FastAPI's own handler)."""
    return type("PlainParamsRoute", (_PlainParams,), {"parse": staticmethod(parse)})
