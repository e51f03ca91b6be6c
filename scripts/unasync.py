#!/usr/bin/env python3
"""Generate the SDK's sync namespaces from their async source, as httpcore does with unasync.

    python scripts/unasync.py          # rewrite the generated files
    python scripts/unasync.py --check  # exit 1 if a generated file is stale (run by a test)

Each SDK method is written once, in the async file; the sync twin differs only by the
substitutions below, so the two can never drift apart. The generated files are formatted
like the rest of the SDK (their imports sorted by ruff), so ``ruff check`` passes on them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parent.parent / "memplane"
# async source -> generated sync file
FILES = {
    "_namespace_async.py": "_namespace_sync.py",
    "_content_async.py": "_content_sync.py",
    "_governance_async.py": "_governance_sync.py",
    "_compliance_async.py": "_compliance_sync.py",
    "_admin_async.py": "_admin_sync.py",
    "_dlp_async.py": "_dlp_sync.py",
    "_async_client.py": "_client.py",
}

SUBSTITUTIONS = [
    (re.compile(r"^import asyncio\n", re.MULTILINE), ""),
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\basyncio\.sleep\b"), "time.sleep"),
    (re.compile(r"\bAsyncIterator\b"), "Iterator"),
    (re.compile(r"\bAsyncBaseTransport\b"), "BaseTransport"),
    (re.compile(r"\bAsyncClient\b"), "Client"),
    (re.compile(r"\bAsyncSender\b"), "Sender"),
    (re.compile(r"\bAsync(\w+API)\b"), r"\1"),
    (re.compile(r"\b_async_client\b"), "_client"),
    (re.compile(r"\b_(\w+)_async\b"), r"_\1_sync"),
    (re.compile(r"\basync (def|for|with)\b"), r"\1"),
    (re.compile(r"__a(enter|exit)__"), r"__\1__"),
    (re.compile(r"\ba(close|read|iter_bytes)\b"), r"\1"),
    (re.compile(r"\bAn asynchronous\b"), "A synchronous"),
]

HEADER = '''"""GENERATED from {source} by scripts/unasync.py: do not edit.

Edit {source} and run ``python scripts/unasync.py``; a test checks the two agree.
"""
'''


ONE_LINE_IMPORT = re.compile(r"^(from [\w.]+ import )([\w, ]+)$", re.MULTILINE)


def _isort_key(name: str) -> tuple[int, str]:
    """isort's order within one import (ruff's default): constants, classes, the rest."""
    if name.isupper() and len(name) > 1:
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def _sort_names(match: re.Match[str]) -> str:
    names = sorted((name.strip() for name in match.group(2).split(",")), key=_isort_key)
    return match.group(1) + ", ".join(names)


def unasync(source_name: str, text: str) -> str:
    docstring_end = text.index('"""', text.index('"""') + 3) + 3
    body = text[docstring_end:]
    for pattern, replacement in SUBSTITUTIONS:
        body = pattern.sub(replacement, body)
    # A renamed name (AsyncIterator -> Iterator) may now sort elsewhere in its import.
    body = ONE_LINE_IMPORT.sub(_sort_names, body)
    return HEADER.format(source=source_name) + "\n" + body.lstrip("\n")


def stale() -> list[str]:
    """The generated files whose text differs from what their source generates."""
    return [target for source, target in FILES.items()
            if (SDK / target).read_text() != unasync(source, (SDK / source).read_text())]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        out_of_date = stale()
        for name in out_of_date:
            print(f"memplane/{name} is stale: run python scripts/unasync.py", file=sys.stderr)
        return 1 if out_of_date else 0
    for source, target in FILES.items():
        (SDK / target).write_text(unasync(source, (SDK / source).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
