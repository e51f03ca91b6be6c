"""The console's files: the checked-in build is exactly what its sources build to, the
TypeScript type-checks, and the server serves only those files, each with the strict
Content-Security-Policy, nothing inline and nothing from another origin."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import httpx

from control_plane.console.router import CSP, FILES

from .conftest import CONSOLE, install_console_tools

STATIC = Path(__file__).resolve().parents[2] / "control_plane" / "console" / "static"


def test_the_checked_in_build_is_what_the_sources_build_to(tmp_path: Path) -> None:
    install_console_tools()
    fresh = tmp_path / "console.js"
    subprocess.run(["node", "build.mjs", "--out", str(fresh)], cwd=CONSOLE, check=True,
                   timeout=300)
    assert fresh.read_bytes() == (STATIC / "console.js").read_bytes(), (
        "control_plane/console/static/console.js is stale: run `npm run build` in console/")


def test_the_sources_type_check() -> None:
    install_console_tools()
    done = subprocess.run(["node", "node_modules/typescript/bin/tsc", "--noEmit", "-p", "."],
                          cwd=CONSOLE, capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout) == (0, "")


def test_nothing_inline_and_nothing_from_elsewhere() -> None:
    html = (STATIC / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script src="console.js" defer>']
    assert not re.search(r"style=|<style|\son[a-z]+=", html, re.IGNORECASE)
    script = (STATIC / "console.js").read_text()
    assert not re.search(r"\beval\(|new Function\(|innerHTML|outerHTML|localStorage|"
                         r"sessionStorage|document\.cookie", script)
    for name in FILES:
        text = (STATIC / name).read_text()
        # the SVG's namespace is a name, not a request
        urls = set(re.findall(r"https?://[^\s\"')]+", text)) - {"http://www.w3.org/2000/svg"}
        assert urls == set(), name
    assert sorted(p.name for p in STATIC.iterdir()) == sorted(FILES)


def test_the_server_serves_the_files_with_the_policy(stack: Any) -> None:
    with httpx.Client(base_url=stack.base_url, timeout=30) as http:
        moved = http.get("/console")
        page = http.get("/console/")
        assets = {name: http.get(f"/console/{name}") for name in FILES}
        missing = http.get("/console/secrets.txt")
        outside = http.get("/console/..%2Fapp.py")
    assert (moved.status_code, moved.headers["location"]) == (308, "/console/")
    assert page.content == (STATIC / "index.html").read_bytes()
    for name, answer in assets.items():
        assert (answer.status_code, answer.headers["content-type"]) == (200, FILES[name])
        assert answer.content == (STATIC / name).read_bytes()
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in CSP and "script-src 'self';" in CSP
    assert "unsafe" not in CSP
    assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
    assert outside.status_code == 404
