"""The performance reference and its studies link to each other: every relative link in
docs/performance.md, docs/performance/*.md and docs/bench.md names a file that exists (and a
heading in it, for a link with an anchor), and every study is listed on the reference page."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _pages() -> list[Path]:
    studies = sorted((DOCS / "performance").glob("*.md"))
    return [DOCS / "performance.md", DOCS / "bench.md", *studies]


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in _pages():
        for target in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            found = (page.parent / path).resolve() if path else page
            if not found.exists():
                broken.append(f"{page.name}: {target}")
                continue
            if anchor and found.is_file():
                headings = {_anchor(line.lstrip("#")) for line in found.read_text().splitlines()
                            if line.startswith("#")}
                if anchor not in headings:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_every_study_is_listed_on_the_reference_page() -> None:
    listed = set(LINK.findall((DOCS / "performance.md").read_text()))
    studies = {f"performance/{p.name}" for p in (DOCS / "performance").glob("*.md")}
    assert len(studies) >= 25
    assert studies - listed == set()
