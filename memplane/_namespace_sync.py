"""GENERATED from _namespace_async.py by scripts/unasync.py: do not edit.

Edit _namespace_async.py and run ``python scripts/unasync.py``; a test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import httpx

from ._base import Call, ClientConfig
from ._models import Page

T = TypeVar("T")

__all__ = ["Sender"]


class Sender(Protocol):
    """The client as its namespaces see it: one call sent, or a listing walked page by page."""

    _config: ClientConfig
    _http: httpx.Client

    def _send(self, call: Call[T]) -> T: ...

    def _iterate(self, page_call: Callable[[str | None], Call[Page[T]]]) -> Iterator[T]:
        ...


class _Namespace:
    def __init__(self, client: Sender) -> None:
        self._client = client
