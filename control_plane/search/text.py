"""The text a memory is searched by (embedded and keyword-scored)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_MAIN_FIELDS = ("content", "text", "summary")


def searchable_text(value: Any, title: str | None) -> str:
    """For a string value the string; for a dict its ``content``, ``text`` or ``summary``
    when one is a string, else every string leaf joined; for anything else every string
    leaf. The title, when there is one, comes first."""
    body: str
    if isinstance(value, str):
        body = value
    else:
        main = next((value[f] for f in _MAIN_FIELDS
                     if isinstance(value, dict) and isinstance(value.get(f), str)), None)
        body = main if main is not None else " ".join(_leaves(value))
    parts = [p for p in (title, body) if p]
    return "\n".join(parts)


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
