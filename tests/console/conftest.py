"""The compliance console in a real browser: Playwright (Python) driving the system's
Chromium (Debian's ``chromium`` package; Playwright's own browser download is not used),
axe-core from console/node_modules (``console/install``), and screenshots of each page in
.cache/console-screenshots/ (git-ignored) for a reviewer to look at.

Without Chromium the tests skip, except under CI=true, where they fail: CI installs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"
SCREENSHOTS = ROOT / ".cache" / "console-screenshots"
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def _missing(what: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what}; CI installs it (.ci/run)")
    pytest.skip(what)


def chromium_path() -> str | None:
    configured = os.environ.get("MEMPLANE_CHROMIUM")
    if configured:
        return configured
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def install_console_tools() -> None:
    """console/node_modules at the lock's versions (esbuild, TypeScript, axe-core)."""
    if shutil.which("npm") is None:
        _missing("npm is not installed (the console's build and axe-core come from npm)")
    done = subprocess.run([str(CONSOLE / "install")], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"console/install failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="session")
def axe_source() -> str:
    install_console_tools()
    return (CONSOLE / "node_modules" / "axe-core" / "axe.min.js").read_text()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one module's tests. Not for the session: while Playwright's sync API is
    open it holds a running event loop on the main thread, and every later test of the
    same worker that starts one (``asyncio.run``: the async SDK's) would fail."""
    executable = chromium_path()
    if executable is None or not Path(executable).exists():
        _missing("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Watched:
    """A page, and what its console and network said: errors and CSP violations fail a
    test that checks them (``problems``)."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    foreign_requests: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [*self.console_errors, *self.page_errors, *self.foreign_requests]


@pytest.fixture
def console_page(browser: Any, stack: Any) -> Iterator[Watched]:
    context = browser.new_context(base_url=stack.base_url, viewport={"width": 1200,
                                                                      "height": 900},
                                  accept_downloads=True)
    page = context.new_page()
    watched = Watched(page)
    page.on("console", lambda m: watched.console_errors.append(m.text)
            if m.type == "error" else None)
    page.on("pageerror", lambda e: watched.page_errors.append(str(e)))
    page.on("request", lambda r: watched.foreign_requests.append(r.url)
            if not r.url.startswith((stack.base_url, "blob:", "data:")) else None)
    try:
        yield watched
    finally:
        context.close()


def axe_violations(page: Any, axe_source: str) -> list[dict[str, Any]]:
    """Serious and critical axe-core violations of the page as it is now (WCAG 2.x A/AA
    and best practices). axe is added through Playwright's isolated script injection
    (CDP), which the page's CSP does not govern."""
    page.evaluate(axe_source)
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.map(n => n.target.join(' '))}));
    }""")
    return [v for v in result if v["impact"] in ("serious", "critical")]


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
