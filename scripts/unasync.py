#!/usr/bin/env python3
"""Generate the SDK's sync namespaces from their async source, as httpcore does with unasync.

    python scripts/unasync.py          # rewrite the generated files
    python scripts/unasync.py --check  # exit 1 if a generated file is stale (run by a test)

Each SDK method is written once, in the async file; the sync twin differs only by the
substitutions below, so the two can never drift apart.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parent.parent / "memplane"
# async source -> generated sync file
FILES = {"_layer_async.py": "_layer_sync.py"}

SUBSTITUTIONS = [
    (re.compile(r"\bAsyncIterator\b"), "Iterator"),
    (re.compile(r"\bAsyncClient\b"), "Client"),
    (re.compile(r"\b_async_client\b"), "_client"),
    (re.compile(r"\bAsync(\w+API)\b"), r"\1"),
    (re.compile(r"\basync def\b"), "def"),
    (re.compile(r"\bawait "), ""),
]

HEADER = '''"""GENERATED from {source} by scripts/unasync.py: do not edit.

Edit {source} and run ``python scripts/unasync.py``; a test checks the two agree.
"""
'''


def unasync(source_name: str, text: str) -> str:
    docstring_end = text.index('"""', text.index('"""') + 3) + 3
    body = text[docstring_end:]
    for pattern, replacement in SUBSTITUTIONS:
        body = pattern.sub(replacement, body)
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
