"""A summariser that calls any OpenAI-compatible chat endpoint a tenant configured.

``POST {base_url}/chat/completions`` with the versioned compression prompt (prompt.py), the
tenant's model, ``temperature`` 0 and ``max_tokens``; the API key as a Bearer token.

- **One guard.** Every connection goes through the endpoint guard (storage_adapters/
  netguard.py) with the operator's allow-list: no loopback, private, link-local or metadata
  address after DNS resolution, no proxy, no redirect followed. A refusal is
  ``endpoint_not_allowed``.
- **Timeouts.** ``timeout_seconds`` bounds each phase of an attempt (connect, send, every
  read); the whole attempt is cut off at twice that, so a trickling answer cannot hold a
  worker.
- **Retries.** Timeouts, connection failures and 5xx answers are retried with exponential
  backoff (0.5 s, 1 s, 2 s... capped); a 429 waits what ``Retry-After`` says (seconds or an
  HTTP date), capped at ``max_retry_wait``. The sleep function is injected, so tests wait
  for nothing. Exhausted, the bucket fails with ``timeout``, ``unreachable``, ``server_error``
  or ``rate_limited``; 401/403 fail at once with ``auth_failed``, any other answer with
  ``endpoint_refused``.
- **Malformed answers** (not JSON, no ``choices``, no text) are ``malformed_answer``.
- **Bounded answers.** At most :data:`MAX_ANSWER_BYTES`, and before it is parsed its JSON may
  hold no more brackets and values than a completion of ``max_tokens`` tokens can
  (:func:`answer_shape`), so parsing builds objects in proportion to the text asked for —
  never a blow-up of tiny values (``[],[],…``) — and a nesting deep enough to exhaust the
  parser's recursion is ``malformed_answer`` too.
- **Budget.** Before each attempt the run's :class:`TokenBudget` must cover the estimate
  (prompt at one token per 3 characters plus ``max_tokens``), else :class:`BudgetSpent` and
  nothing is sent. Afterwards ``usage.total_tokens`` is charged (the estimate when absent).

Nothing the remote answers reaches an error, a log line or an audit row: failures carry a
generic code; logs name the host, the code and the HTTP status only. The key is never logged.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import urlsplit

import httpx

from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy, refusal_in

from ..json_shape import within_shape
from . import BudgetSpent, EventText, SummarizerFailed, Summary, TokenBudget
from . import prompt as compression

log = logging.getLogger(__name__)

PROVIDER = "openai_compatible"
MAX_ANSWER_BYTES = 1024 * 1024
# Brackets and values (",", ":") an answer may hold: around the text (choices, message,
# usage, a provider's extra fields) and per token of text asked for (a token of text is a
# few characters, of which few are brackets, commas or colons).
FIXED_BRACKETS = 256
FIXED_VALUES = 1024
PER_TOKEN = 8


def answer_shape(max_tokens: int) -> dict[str, int]:
    """The most brackets and values a completion of ``max_tokens`` tokens may hold."""
    return {"brackets": FIXED_BRACKETS + PER_TOKEN * max_tokens,
            "values": FIXED_VALUES + PER_TOKEN * max_tokens}


_RETRY_STATUSES = frozenset({500, 502, 503, 504})


class _Retry(Exception):
    def __init__(self, code: str, wait: float | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.wait = wait


def retry_after_seconds(value: str | None, now: Callable[[], datetime]) -> float | None:
    """``Retry-After`` as seconds to wait: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now()).total_seconds()
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


class OpenAICompatibleSummarizer:
    """Summarises a bucket of events through one OpenAI-compatible chat endpoint."""

    provider = PROVIDER
    prompt_version = compression.PROMPT_VERSION

    def __init__(self, *, base_url: str, model: str, api_key: str | None,
                 policy: EndpointPolicy, budget: TokenBudget | None = None,
                 timeout_seconds: float = 30.0, max_retries: int = 2,
                 max_output_tokens: int = 1024, max_input_chars: int = 48_000,
                 max_retry_wait: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.policy = policy
        self.budget = budget if budget is not None else TokenBudget()
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.max_output_tokens = max_output_tokens
        self.max_input_chars = max_input_chars
        self.max_retry_wait = max_retry_wait
        self.sleep = sleep
        self.now = now
        self.host = urlsplit(self.base_url).hostname or ""

    def __repr__(self) -> str:  # no key in a traceback or a log line
        return f"OpenAICompatibleSummarizer(host={self.host!r}, model={self.model!r})"

    # -- the Summarizer protocol ------------------------------------------------------

    def summarize(self, scope: str, scope_ref: str, events: Sequence[EventText]) -> Summary:
        if not events:
            raise ValueError("a summary needs at least one event")
        chat = compression.messages(scope, scope_ref, events, max_chars=self.max_input_chars)
        estimate = compression.estimate_tokens(chat) + self.max_output_tokens
        answer, used = self._complete(chat, self.max_output_tokens, estimate,
                                      need_text=True)
        return Summary(text=answer.strip(), provider=self.provider, model=self.model,
                       prompt_version=self.prompt_version, tokens_used=used)

    def complete(self, chat: list[dict[str, str]]) -> tuple[str, int]:
        """One chat completion for another purpose (remember's extraction), with this
        endpoint's guard, budget, retries and bounds: the answer's text and the tokens
        charged. Raises SummarizerFailed or BudgetSpent as ``summarize`` does."""
        estimate = compression.estimate_tokens(chat) + self.max_output_tokens
        return self._complete(chat, self.max_output_tokens, estimate, need_text=True)

    def probe(self) -> None:
        """A one-token call that proves the URL, key and model answer as a chat endpoint.
        Raises SummarizerFailed with the problem code."""
        chat = [{"role": "user", "content": "Reply with: ok"}]
        self._complete(chat, 1, compression.estimate_tokens(chat) + 1, need_text=False)

    # -- the call ---------------------------------------------------------------------

    def _complete(self, chat: list[dict[str, str]], max_tokens: int, estimate: int, *,
                  need_text: bool) -> tuple[str, int]:
        url = f"{self.base_url}/chat/completions"
        try:
            self.policy.check_endpoint(url)
        except EndpointNotAllowed:
            self._fail("endpoint_not_allowed")
        payload = {"model": self.model, "messages": chat, "max_tokens": max_tokens,
                   "temperature": 0}
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempt = 0
        while True:
            self.budget.ensure(estimate)
            try:
                raw = self._post(url, payload, headers)
            except _Retry as retry:
                if attempt >= self.max_retries:
                    self._fail(retry.code)
                wait = retry.wait if retry.wait is not None else 0.5 * 2 ** attempt
                attempt += 1
                log.info("summariser call to %s: %s, retry %d of %d in %.1f s", self.host,
                         retry.code, attempt, self.max_retries,
                         min(wait, self.max_retry_wait))
                self.sleep(min(wait, self.max_retry_wait))
                continue
            return self._parse(raw, estimate, max_tokens, need_text=need_text)

    def _post(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> bytes:
        # httpx's timeout bounds each phase (connect, send, every read); an endpoint that
        # trickles its answer a byte at a time is cut off at twice the timeout in all.
        deadline = time.monotonic() + 2 * self.timeout_seconds
        try:
            with httpx.Client(transport=self.policy.httpx_transport(),
                              timeout=httpx.Timeout(self.timeout_seconds),
                              follow_redirects=False) as client, \
                    client.stream("POST", url, json=payload, headers=headers) as response:
                status = response.status_code
                if status == 200:
                    return self._read(response, deadline)
                if status == 429:
                    raise _Retry("rate_limited", retry_after_seconds(
                        response.headers.get("retry-after"), self.now))
                if status in _RETRY_STATUSES:
                    raise _Retry("server_error")
                log.info("summariser call to %s answered HTTP %d", self.host, status)
                self._fail("auth_failed" if status in (401, 403) else "endpoint_refused")
        except (_Retry, SummarizerFailed, BudgetSpent):
            raise
        except httpx.TimeoutException:
            raise _Retry("timeout") from None
        except TimeoutError:
            raise _Retry("timeout") from None
        except (httpx.TransportError, OSError) as exc:
            if refusal_in(exc) is not None:
                self._fail("endpoint_not_allowed")
            raise _Retry("unreachable") from None
        except (httpx.InvalidURL, ValueError):
            self._fail("endpoint_refused")  # a URL saved before a rule was tightened

    def _read(self, response: httpx.Response, deadline: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise _Retry("timeout")
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                self._fail("malformed_answer")
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes, estimate: int, max_tokens: int, *,
               need_text: bool) -> tuple[str, int]:
        answer: Any = None
        if within_shape(raw, **answer_shape(max_tokens)):
            try:
                answer = json.loads(raw)
            except (ValueError, RecursionError):
                answer = None
        usage = answer.get("usage") if isinstance(answer, dict) else None
        total = usage.get("total_tokens") if isinstance(usage, dict) else None
        used = total if isinstance(total, int) and not isinstance(total, bool) \
            and total >= 0 else estimate
        self.budget.charge(used)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            self._fail("malformed_answer")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if need_text and (not isinstance(content, str) or not content.strip()):
            self._fail("malformed_answer")
        return (content if isinstance(content, str) else ""), used

    def _fail(self, code: str) -> NoReturn:
        log.info("summariser call to %s failed: %s", self.host, code)
        raise SummarizerFailed(code)
