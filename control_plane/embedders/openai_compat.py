"""An embedder that calls any OpenAI-compatible embeddings endpoint a tenant configured.

``POST {base_url}/embeddings`` with ``{"model", "input": [texts]}``; the API key as a Bearer
token. The same rules as the summariser (control_plane/summarizers/openai_compat.py):

- **One guard.** Every connection goes through the endpoint guard (storage_adapters/
  netguard.py) with the operator's allow-list; no redirect followed. A refusal is
  ``endpoint_not_allowed``.
- **Timeouts.** ``timeout_seconds`` bounds each phase of an attempt; the whole attempt is cut
  off at twice that.
- **Retries.** Timeouts, connection failures and 5xx answers are retried with exponential
  backoff; a 429 waits what ``Retry-After`` says, capped. The sleep is injected. Exhausted:
  ``timeout``, ``unreachable``, ``server_error`` or ``rate_limited``; 401/403 fail at once
  with ``auth_failed``, any other status with ``endpoint_refused``.
- **Malformed answers** (not JSON, no ``data``, a vector missing, of the wrong length or not
  numbers) are ``malformed_answer``; the first answer fixes the dimension.
- **Bounded answers.** An answer may be as large as the vectors asked for can take
  (:func:`answer_cap`: texts × (dimension × :data:`NUMBER_BYTES` + :data:`ITEM_BYTES`) +
  :data:`FIXED_BYTES`, with :data:`MAX_DIM` while the dimension is unknown); more is
  ``malformed_answer``, unread. Before it is parsed, its JSON may hold no more values and
  brackets than such vectors have (:func:`_within_shape`), so parsing builds objects in
  proportion to the vectors asked for — never a blow-up of tiny values (``0,0,…``, ``[],…``)
  nor a nesting deep enough to exhaust the parser's recursion.
- **Batches.** At most ``max_batch`` texts per call; empty texts are not sent (zero rows).

Nothing the remote answers reaches an error, a log line or an audit row; logs name the host,
the code and the HTTP status only. The key is never logged.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import urlsplit

import httpx
import numpy as np

from storage_adapters.netguard import EndpointNotAllowed, EndpointPolicy, refusal_in

from ..json_shape import within_shape
from ..summarizers.openai_compat import retry_after_seconds
from . import SENTENCES, EmbedderFailed

log = logging.getLogger(__name__)

PROVIDER = "openai_compatible"
MAX_DIM = 8192
# What an answer may take per number ("-1.2345678901234567e-05," with pretty-printing's
# newline and indentation), per vector (its object: "object", "index", brackets) and around
# the vectors (model, usage, ...); and how many values and brackets beyond the numbers.
NUMBER_BYTES = 48
ITEM_BYTES = 1024
FIXED_BYTES = 64 * 1024
ITEM_VALUES = 16
FIXED_VALUES = 256


def answer_cap(count: int, dim: int) -> int:
    """The largest answer accepted for ``count`` vectors of ``dim`` numbers."""
    return FIXED_BYTES + count * (ITEM_BYTES + dim * NUMBER_BYTES)


def _within_shape(raw: bytes, count: int, dim: int) -> bool:
    """Whether JSON ``raw`` has at most the values and brackets ``count`` vectors of ``dim``
    numbers need (counted on the bytes, strings included: an honest answer's strings are
    few), so parsing it cannot build more than such vectors, nor recurse deeply."""
    return within_shape(raw, brackets=4 * count + 64,
                        values=count * (dim + ITEM_VALUES) + FIXED_VALUES)


_RETRY_STATUSES = frozenset({500, 502, 503, 504})


class _Retry(Exception):
    def __init__(self, code: str, wait: float | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.wait = wait


class OpenAICompatibleEmbedder:
    """Embeds texts through one OpenAI-compatible ``/embeddings`` endpoint."""

    provider = PROVIDER

    def __init__(self, *, base_url: str, model: str, api_key: str | None,
                 policy: EndpointPolicy, dim: int | None = None,
                 timeout_seconds: float = 30.0, max_retries: int = 2, max_batch: int = 64,
                 max_retry_wait: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self._api_key = api_key
        self.policy = policy
        self.dim = dim or 0  # 0 until known: fixed by the probe or the first answer
        self.timeout_seconds = timeout_seconds
        self.max_retries = max_retries
        self.max_batch = max_batch
        self.max_retry_wait = max_retry_wait
        self.sleep = sleep
        self.now = now
        self.host = urlsplit(self.base_url).hostname or ""

    def __repr__(self) -> str:  # no key in a traceback or a log line
        return f"OpenAICompatibleEmbedder(host={self.host!r}, model={self.model!r})"

    # -- the Embedder protocol --------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        wanted = [i for i, text in enumerate(texts) if text.strip()]
        rows: dict[int, np.ndarray] = {}
        for start in range(0, len(wanted), self.max_batch):
            part = wanted[start:start + self.max_batch]
            for index, vector in zip(part, self._call([texts[i] for i in part]), strict=True):
                rows[index] = vector
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for index, vector in rows.items():
            out[index] = vector
        return out

    def probe(self) -> int:
        """One call with one short text: proves URL, key and model answer as an embeddings
        endpoint; returns (and fixes) the dimension. Raises EmbedderFailed."""
        return int(self._call(["memplane probe"]).shape[1])

    # -- the call ---------------------------------------------------------------------

    def _call(self, texts: list[str]) -> np.ndarray:
        url = f"{self.base_url}/embeddings"
        try:
            self.policy.check_endpoint(url)
        except EndpointNotAllowed:
            self._fail("endpoint_not_allowed")
        payload = {"model": self.model, "input": texts, "encoding_format": "float"}
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempt = 0
        while True:
            try:
                raw = self._post(url, payload, headers, len(texts))
            except _Retry as retry:
                if attempt >= self.max_retries:
                    self._fail(retry.code)
                wait = retry.wait if retry.wait is not None else 0.5 * 2 ** attempt
                attempt += 1
                log.info("embeddings call to %s: %s, retry %d of %d in %.1f s", self.host,
                         retry.code, attempt, self.max_retries,
                         min(wait, self.max_retry_wait))
                self.sleep(min(wait, self.max_retry_wait))
                continue
            return self._parse(raw, len(texts))

    def _post(self, url: str, payload: dict[str, Any], headers: dict[str, str],
              count: int) -> bytes:
        deadline = time.monotonic() + 2 * self.timeout_seconds
        try:
            with httpx.Client(transport=self.policy.httpx_transport(),
                              timeout=httpx.Timeout(self.timeout_seconds),
                              follow_redirects=False) as client, \
                    client.stream("POST", url, json=payload, headers=headers) as response:
                status = response.status_code
                if status == 200:
                    return self._read(response, deadline,
                                      answer_cap(count, self.dim or MAX_DIM))
                if status == 429:
                    raise _Retry("rate_limited", retry_after_seconds(
                        response.headers.get("retry-after"), self.now))
                if status in _RETRY_STATUSES:
                    raise _Retry("server_error")
                log.info("embeddings call to %s answered HTTP %d", self.host, status)
                self._fail("auth_failed" if status in (401, 403) else "endpoint_refused")
        except (_Retry, EmbedderFailed):
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
            self._fail("endpoint_refused")

    def _read(self, response: httpx.Response, deadline: float, cap: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise _Retry("timeout")
            size += len(chunk)
            if size > cap:
                self._fail("malformed_answer")
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse(self, raw: bytes, count: int) -> np.ndarray:
        if not _within_shape(raw, count, self.dim or MAX_DIM):
            self._fail("malformed_answer")
        try:
            answer = json.loads(raw)
        except (ValueError, RecursionError):
            answer = None
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != count:
            self._fail("malformed_answer")
        vectors: list[list[float] | None] = [None] * count
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                self._fail("malformed_answer")
            index = item.get("index", position)
            vector = item.get("embedding")
            if (not isinstance(index, int) or isinstance(index, bool)
                    or not 0 <= index < count or vectors[index] is not None
                    or not isinstance(vector, list) or not 1 <= len(vector) <= MAX_DIM
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                               and math.isfinite(x) for x in vector)):
                self._fail("malformed_answer")
            vectors[index] = vector
        dims = {len(v) for v in vectors if v is not None}
        if len(dims) != 1 or (self.dim and dims != {self.dim}):
            self._fail("malformed_answer")
        out = np.array(vectors, dtype=np.float32)
        self.dim = out.shape[1]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if not np.all(norms > 0):
            self._fail("malformed_answer")
        return (out / norms).astype(np.float32)

    def _fail(self, code: str) -> NoReturn:
        log.info("embeddings call to %s failed: %s", self.host, code)
        raise EmbedderFailed(code, SENTENCES.get(code, "the embeddings endpoint failed"))
