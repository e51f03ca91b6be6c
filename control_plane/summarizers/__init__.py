"""Summarisers behind one interface, routed per tenant (issue 11, point 5).

The compactor hands a summariser the events of one (scope, scope_ref) bucket and gets one
:class:`Summary` back. Which summariser a tenant gets is decided by
:func:`~.service.summarizer_for`: the OpenAI-compatible chat endpoint the tenant configured
(``PUT /v1/summarizer/config``), else the built-in offline
:class:`~.extractive.ExtractiveSummarizer`.

Failure contract, for the compactor:

- :class:`SummarizerFailed` (``code``): this bucket could not be summarised (the endpoint
  timed out, refused, answered garbage...). Mark nothing; the bucket is tried again on the
  next run. ``code`` is a generic problem code; no remote answer is ever carried.
- :class:`BudgetSpent`: the run's :class:`TokenBudget` cannot cover the next call. Raised
  *before* the call, so nothing was sent; stop the run cleanly, the rest waits for tomorrow.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..plane.data_plane import DataPlane
    from ..settings import Settings

__all__ = ["BudgetSpent", "EventText", "Running", "Summarizer", "SummarizerFailed", "Summary",
           "TokenBudget"]


@dataclass(frozen=True, slots=True)
class EventText:
    """One event as a summariser sees it: its id, kind, time and (decrypted) Markdown body."""

    id: uuid.UUID
    kind: str
    occurred_at: datetime
    body: str


@dataclass(frozen=True, slots=True)
class Summary:
    """What a summariser wrote, and who wrote it (recorded as the entry's provenance)."""

    text: str
    provider: str
    model: str
    prompt_version: str
    tokens_used: int = 0


@runtime_checkable
class Summarizer(Protocol):
    """Turns the events of one bucket into one summary. Implementations are synchronous and
    may be called many times (once per bucket) in one run."""

    provider: str
    model: str
    prompt_version: str

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        """Summarise ``events`` (oldest first). Raises :class:`SummarizerFailed` when this
        bucket cannot be summarised now, :class:`BudgetSpent` when the run's token budget
        cannot cover the call."""
        ...


class Running(Protocol):
    """What summariser routing uses of the running server (``control_plane.runtime.Runtime``
    is one): its settings, and its data plane, whose credential box seals and opens the
    tenants' API keys. Where the functions take a bare ``Settings`` instead, the box is built
    from the server key."""

    @property
    def settings(self) -> Settings: ...

    @property
    def plane(self) -> DataPlane: ...


class SummarizerFailed(Exception):
    """This bucket could not be summarised now; retry it next run and mark nothing.

    ``code`` is one of: ``timeout``, ``unreachable``, ``rate_limited``, ``server_error``,
    ``auth_failed``, ``endpoint_refused``, ``endpoint_not_allowed``, ``malformed_answer``,
    ``credentials_unreadable``. The message is a fixed sentence: never the remote's answer.
    """

    def __init__(self, code: str, detail: str | None = None) -> None:
        super().__init__(detail or SENTENCES.get(code, "the summariser failed"))
        self.code = code


class BudgetSpent(Exception):
    """The run's token budget cannot cover the next call; stop the run (nothing was sent)."""

    def __init__(self, needed: int, remaining: int) -> None:
        super().__init__(f"the token budget of this run is spent: the next call needs about "
                         f"{needed} tokens and {remaining} remain")
        self.needed = needed
        self.remaining = remaining


SENTENCES = {
    "timeout": "the summariser endpoint did not answer in time",
    "unreachable": "the summariser endpoint could not be reached",
    "rate_limited": "the summariser endpoint kept answering 429 (rate limited)",
    "server_error": "the summariser endpoint kept failing with a server error",
    "auth_failed": "the summariser endpoint rejected the API key",
    "endpoint_refused": "the summariser endpoint refused the request (check the base URL and "
                        "the model name)",
    "endpoint_not_allowed": "the summariser endpoint is not allowed on this server: use a "
                            "public endpoint, or one the operator lists in "
                            "MEMPLANE_ALLOWED_ENDPOINTS (loopback, private, link-local and "
                            "metadata addresses are refused)",
    "malformed_answer": "the summariser endpoint did not answer as an OpenAI-compatible chat "
                        "completion",
    "credentials_unreadable": "the stored summariser API key does not decrypt with this "
                              "server's key; configure the summariser again",
}


class TokenBudget:
    """Tokens one run may spend on summariser calls; ``limit`` None means no limit.

    Thread-safe. A summariser calls :meth:`ensure` with its estimate before each call (raises
    :class:`BudgetSpent` when it cannot be covered) and :meth:`charge` with what the call
    really used afterwards.
    """

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None and limit < 0:
            raise ValueError("a token budget cannot be negative")
        self.limit = limit
        self._spent = 0
        self._lock = threading.Lock()

    @property
    def spent(self) -> int:
        return self._spent

    @property
    def remaining(self) -> int | None:
        """Tokens left, or None without a limit."""
        if self.limit is None:
            return None
        return max(0, self.limit - self._spent)

    def narrow(self, limit: int | None) -> None:
        """Apply a (tenant's) limit on top of the one already set: the smaller one wins."""
        if limit is None:
            return
        with self._lock:
            self.limit = limit if self.limit is None else min(self.limit, limit)

    def ensure(self, needed: int) -> None:
        """Raise :class:`BudgetSpent` unless ``needed`` more tokens fit in the budget."""
        with self._lock:
            if self.limit is not None and self._spent + needed > self.limit:
                raise BudgetSpent(needed, max(0, self.limit - self._spent))

    def charge(self, used: int) -> None:
        with self._lock:
            self._spent += max(0, used)
