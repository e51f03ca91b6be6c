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

A route with a JSON body (:func:`plain_route` with ``body``) reads the body on the event loop
and validates it in the thread pool, beside the endpoint, with the model's own JSON parser
(``model_validate_json``), instead of FastAPI's ``json.loads`` and validation on the event
loop. A body the model refuses goes to FastAPI's own handler, which answers its 422 as before.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
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
    body: ClassVar[type[BaseModel] | None]

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        standard = super().get_route_handler()
        endpoint, parse, model = self.endpoint, type(self).parse, type(self).body

        async def handler(request: Request) -> Response:
            values = parse(request) if _telemetry() is None else None
            if values is None:
                return await standard(request)
            if model is None:
                answer: Response = await run_in_threadpool(endpoint, request=request, **values)
                return answer
            raw = await request.body()  # kept by the request: FastAPI's way reads it again
            done = await run_in_threadpool(_with_body, endpoint, model, raw, request, values)
            return await standard(request) if done is None else done

        return handler


def _with_body(endpoint: Callable[..., Response], model: type[BaseModel], raw: bytes,
               request: Request, values: dict[str, Any]) -> Response | None:
    """The endpoint's answer to the validated body; None when the model refuses it."""
    try:
        body = model.model_validate_json(raw)
    except ValidationError:
        return None
    return endpoint(request=request, body=body, **values)


def plain_route(parse: Parse, body: type[BaseModel] | None = None) -> type[APIRoute]:
    """The route class (``add_api_route(..., route_class_override=...)``) of a sync endpoint
    that takes ``request`` (and ``body``, a JSON body of the model ``body``) and answers a
    Response, whose plain requests' other parameters ``parse`` gives (or None: FastAPI's own
    handler)."""
    return type("PlainParamsRoute", (_PlainParams,),
                {"parse": staticmethod(parse), "body": body})
