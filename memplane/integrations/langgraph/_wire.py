"""What the store and the checkpointer send, written once for the sync and async clients.

Each operation is a generator that yields the SDK's ``Call``s and receives their answers
(sans-IO): :func:`run_sync` drives it with a ``memplane.Client``, :func:`run_async` with a
``memplane.AsyncClient``. So every key layout, batch and listing is written once.

Key components are encoded reversibly (:func:`encode`): ``%``, ``/`` and ``#`` become
``%25``, ``%2F`` and ``%23``, control characters their UTF-8 percent form, and a bare ``.``
or ``..`` ``%2E``; ``/`` then separates components. A key that would exceed the server's
255-byte limit cannot be made: a component longer than its caller's limit is replaced by
``#`` and 32 hex digits of its SHA-256 (a rule on the component alone, so keys and prefixes
agree), and the value always carries the original names, so nothing is lost.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from ..._base import Call, parse_model, query_params
from ..._batch import BatchResult
from ..._batch import calls as batch_calls
from ..._models import Memory, Page, Pointer

R = TypeVar("R")
T = TypeVar("T")
Step = Generator[Call[Any], Any, R]

MAX_KEY_BYTES = 255
PAGE = 1000
VALUES_PAGE = 100  # the most a page with values holds
_HASHED = "#"


def encode(component: str) -> str:
    """One key component, reversibly, with no ``/`` left in it."""
    out = []
    for ch in component:
        if ch in "%/#" or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            out.append(quote(ch, safe=""))
        else:
            out.append(ch)
    text = "".join(out)
    if text in (".", ".."):
        text = text.replace(".", "%2E")
    return text


def encode_ref(ref: str) -> str:
    """A scope ref (or user id), reversibly: only ``%``, control characters and a leading
    ``/`` are percent-encoded (a scope ref is one path segment, ``/`` included), so plain
    ids such as ``u-42`` or ``org/7`` stay as they are."""
    out = []
    for n, ch in enumerate(ref):
        if ch == "%" or (n == 0 and ch == "/") or unicodedata.category(ch) in (
                "Cc", "Cf", "Cs", "Zl", "Zp"):
            out.append(quote(ch, safe=""))
        else:
            out.append(ch)
    return "".join(out)


def decode(component: str) -> str:
    return unquote(component)


def hashed(component: str) -> str:
    return _HASHED + hashlib.sha256(component.encode()).hexdigest()[:32]


def is_hashed(component: str) -> bool:
    return component.startswith(_HASHED)


def key_bytes(key: str) -> int:
    """The length the server checks: the key as one percent-encoded path segment."""
    return len(quote(unicodedata.normalize("NFC", key), safe=""))


def component(part: str, limit: int) -> str:
    """``part`` encoded, or its hash when the encoding is longer than ``limit`` bytes (a
    rule on the part alone, so every key and prefix made from it agree)."""
    encoded = encode(part)
    return encoded if key_bytes(encoded) <= limit else hashed(part)


def join(fixed: str, parts: Sequence[str], *, limit: int) -> str:
    """``fixed`` followed by the parts (each through :func:`component`) joined with ``/``."""
    key = fixed + "/".join(component(p, limit) for p in parts)
    if key_bytes(key) > MAX_KEY_BYTES:
        raise ValueError("this namespace, thread or key is too deep or too long for a "
                         f"memplane key ({MAX_KEY_BYTES} bytes once encoded); shorten it")
    return key


def prefix_of(fixed: str, parts: Sequence[str], *, limit: int) -> str:
    """The prefix of every key :func:`join` makes from ``parts`` followed by more parts."""
    return fixed + "".join(component(p, limit) + "/" for p in parts)


def every_page(page_at: Callable[[str | None], Call[Page[T]]]) -> Step[list[T]]:
    """The items of every page, one after another: ``page_at(cursor)`` asks for one."""
    found: list[T] = []
    cursor: str | None = None
    while True:
        page = yield page_at(cursor)
        found.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return found


def list_pointers(*, scope: str | None = None, scope_ref: str | None = None,
                  key_prefix: str | None = None, tag: str | None = None,
                  user_id: str | None = None) -> Step[list[Pointer]]:
    """Every pointer matching, page after page (``GET /v1/pointers``)."""
    return (yield from every_page(lambda cursor: list_page(
        scope=scope, scope_ref=scope_ref, key_prefix=key_prefix, tag=tag, user_id=user_id,
        limit=PAGE, cursor=cursor)))


def list_page(*, scope: str | None = None, scope_ref: str | None = None,
              key_prefix: str | None = None, tag: str | None = None,
              user_id: str | None = None, order: str | None = None, limit: int = PAGE,
              cursor: str | None = None) -> Call[Page[Pointer]]:
    """One page of pointers (``GET /v1/pointers``); ``order`` ``key_desc``: by key, down."""
    params = query_params(scope=scope, scope_ref=scope_ref, key_prefix=key_prefix, tag=tag,
                    user_id=user_id, order=order, limit=limit, cursor=cursor)
    return Call("GET", "/v1/pointers", parse_model(Page[Pointer]), params=params)


def memory_page(*, scope: str | None, scope_ref: str | None, key_prefix: str | None,
                order: str | None = None, limit: int = VALUES_PAGE,
                cursor: str | None = None) -> Call[Page[Memory]]:
    """One page of memories with their verified values (``GET /v1/pointers`` with
    ``include_values``: memories a read would serve, at most 100 a page)."""
    params = query_params(scope=scope, scope_ref=scope_ref, key_prefix=key_prefix, order=order,
                    limit=limit, cursor=cursor)
    params["include_values"] = "true"
    return Call("GET", "/v1/pointers", parse_model(Page[Memory]), params=params)


def list_memories(*, scope: str, scope_ref: str, key_prefix: str) -> Step[list[Memory]]:
    """Every memory under ``key_prefix`` with its value, page after page."""
    return (yield from every_page(lambda cursor: memory_page(
        scope=scope, scope_ref=scope_ref, key_prefix=key_prefix, cursor=cursor)))


def batch(ops: list[dict[str, Any]]) -> Step[list[BatchResult]]:
    """Run set / get / delete operations through ``POST /v1/memories:batch`` (1,000 a
    request), one result per operation, in order."""
    results: list[BatchResult] = []
    if not ops:
        return results
    for call in batch_calls(ops, None):
        chunk: list[BatchResult] = yield call
        results.extend(chunk)
    return results


def checked(results: list[BatchResult], *, missing_ok: bool = False) -> list[BatchResult]:
    """Raise the first failure's exception (404 allowed with ``missing_ok``)."""
    for result in results:
        if not result.ok and not (missing_ok and result.status == 404):
            result.raise_for_error()
    return results


def run_sync(send: Callable[[Call[Any]], Any], step: Step[R]) -> R:
    try:
        call = next(step)
        while True:
            try:
                answer = send(call)
            except Exception as exc:
                call = step.throw(exc)
            else:
                call = step.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(send: Callable[[Call[Any]], Any], step: Step[R]) -> R:
    try:
        call = next(step)
        while True:
            try:
                answer = await send(call)
            except Exception as exc:
                call = step.throw(exc)
            else:
                call = step.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
