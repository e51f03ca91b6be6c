"""Serves the compliance console's static files at ``/console/`` with a strict
Content-Security-Policy: scripts, styles, images and requests from this origin only, no
inline script or style, no ``eval``, never framed. The files are read once from the package
(``static/``); nothing else under ``/console/`` answers. They are public, like /docs: the
page asks for an API key and every call it makes is checked like any other."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from ..errors import NotFound

router = APIRouter(include_in_schema=False)

PREFIX = "/console"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
       "form-action 'none'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-cache",
}
FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


@cache
def _read(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


def _file(name: str) -> Response:
    if name not in FILES:
        raise NotFound(f"no console file {name[:100]}; the console is at {PREFIX}/")
    return Response(_read(name), media_type=FILES[name], headers=HEADERS)


@router.get(PREFIX)
def console_root(request: Request) -> RedirectResponse:
    """/console → /console/ (the page's relative links resolve under it)."""
    root = request.scope.get("root_path", "")
    return RedirectResponse(f"{root}{PREFIX}/", status_code=308, headers=HEADERS)


@router.get(f"{PREFIX}/")
def console_page() -> Response:
    return _file("index.html")


@router.get(PREFIX + "/{name}")
def console_asset(name: str) -> Response:
    return _file(name)
