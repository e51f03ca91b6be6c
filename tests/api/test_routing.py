"""How the API finds a request's route: every route of every router is the application's
own, the routes agents call every turn come first, and no two routes of different routers
match the same request — so the routers' order decides only how soon a route is found,
never which one answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from starlette.routing import Match

from control_plane.app import ROUTERS, create_app
from control_plane.memories.router import router as memories_router
from control_plane.search.router import router as search_router
from tests.support.service import make_settings

pytestmark = pytest.mark.databases("sqlite")


def _routes(tmp_path: Path) -> list[APIRoute]:
    """The API's routes (the documentation's pages left out)."""
    app = create_app(make_settings("sqlite", tmp_path, run_background=False))
    return [r for r in app.router.routes if isinstance(r, APIRoute)
            and not r.path.startswith(("/docs", "/redoc"))]


def _sample(path: str) -> str:
    """A concrete path the route matches: each parameter given a plain value."""
    return re.sub(r"\{([^}:]+)(:[^}]+)?\}",
                  lambda m: "user" if m.group(1) == "scope" else "x1", path)


def test_no_request_matches_routes_of_two_routers(tmp_path: Path) -> None:
    routes = _routes(tmp_path)
    router_of = {id(route): n for n, router in enumerate(ROUTERS) for route in router.routes}
    clashes = []
    for route in routes:
        sample = _sample(route.path)
        for method in route.methods:
            others = [other.path for other in routes
                      if router_of[id(other)] != router_of[id(route)]
                      and method in other.methods
                      and other.matches({"type": "http", "method": method, "path": sample,
                                         "root_path": "", "headers": [],
                                         "query_string": b""})[0] == Match.FULL]
            if others:
                clashes.append((method, sample, route.path, others))
    assert len(routes) == len(router_of) >= 80  # every router's route, each once
    assert clashes == []


def test_the_memory_and_search_routes_are_found_first(tmp_path: Path) -> None:
    app = create_app(make_settings("sqlite", tmp_path, run_background=False))
    routes = list(app.router.routes)
    hot = [*memories_router.routes, *search_router.routes]
    assert routes[:len(hot)] == hot
    # Every route is the application's own, once (no nested router to pass through).
    assert all(isinstance(r, APIRoute) for r in routes[:len(hot)])
    paths = [getattr(r, "path", None) for r in routes]
    assert paths.count("/v1/memories/{scope}/{scope_ref}/{key}") == 3  # get, put, delete
    assert paths[-5:] == ["/openapi.json", "/docs-assets", "/docs", "/docs/oauth2-redirect",
                          "/redoc"]
