"""What a namespace of ``AsyncClient`` (``client.memory``, ``client.jobs``, ...) needs of it.

Namespaces hold an ``AsyncSender``, not the client, so the client's module composes them
without the namespaces importing it back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol, TypeVar

import httpx

from ._base import Call, ClientConfig
from ._models import Page

T = TypeVar("T")

__all__ = ["AsyncSender"]


class AsyncSender(Protocol):
    """The client as its namespaces see it: one call sent, or a listing walked page by page."""

    _config: ClientConfig
    _http: httpx.AsyncClient

    async def _send(self, call: Call[T]) -> T: ...

    def _iterate(self, page_call: Callable[[str | None], Call[Page[T]]]) -> AsyncIterator[T]:
        ...


class _Namespace:
    def __init__(self, client: AsyncSender) -> None:
        self._client = client
