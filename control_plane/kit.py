"""Small helpers shared by every domain: cursors, hashing, request ids."""

from __future__ import annotations

import base64
import contextvars
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json
from starlette.responses import Response

from .errors import InvalidInput

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "memplane_request_id", default=None
)

# Text that reaches the database: no control characters (PostgreSQL refuses NUL outright).
PLAIN_TEXT = r"^[^\x00-\x1f\x7f]*$"

MAX_PAGE = 1000
DEFAULT_PAGE = 100

# The longest cursor this server writes (a memory's key of 255 characters, each escaped as
# \uXXXX, with the pointer id) is under 2,200 characters; a longer one is not ours.
MAX_CURSOR_CHARS = 4096
_CURSOR_INVALID = ("cursor is not valid; pass the next_cursor value of the previous page "
                   "unchanged")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def json_of(model: BaseModel | dict[str, Any], status_code: int = 200) -> Response:
    """``model`` (or its JSON-ready dict) as the route's JSON answer, serialised by the
    route itself.

    A sync route that returns a model has FastAPI validate it again in a second trip to the
    thread pool (``serialize_response``) before writing it out; on a busy server that hand-off
    costs about as much as the route's own. The model was built and validated by the route,
    so the hot routes answer with its JSON bytes, serialised in the same worker thread — the
    bytes FastAPI would send for it (no aliases on these models, same serialiser).
    """
    return Response(to_json(model), status_code=status_code, media_type="application/json")


def encode_cursor(value: Any) -> str:
    raw = json.dumps(value, separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Any:
    """The value :func:`encode_cursor` wrote: a scalar, or one flat list or object of
    scalars. Anything else (too long, not base64 of JSON, nested, a string with a control
    character — text this server stores has none, and PostgreSQL refuses NUL) is a 422,
    decided before the JSON parser could recurse into it or the database could see it."""
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidInput(_CURSOR_INVALID)
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode()).decode()
        if not _is_flat(text):
            raise ValueError("nested")
        value = json.loads(text)
    except (ValueError, UnicodeError):
        raise InvalidInput(_CURSOR_INVALID) from None
    parts = value.items() if isinstance(value, dict) else (
        value if isinstance(value, list) else [value])
    if any(isinstance(part, str) and _CONTROL.search(part) for part in _strings(parts)):
        raise InvalidInput(_CURSOR_INVALID)
    return value


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _strings(parts: Any) -> Iterator[Any]:
    """The scalars of a flat cursor's parts (an object's keys and values)."""
    for part in parts:
        if isinstance(part, tuple):
            yield from part
        else:
            yield part


def _is_flat(text: str) -> bool:
    """Whether JSON ``text`` opens at most one array or object (strings cut out first)."""
    outside = _JSON_STRING.sub("", text)
    return outside.count("[") + outside.count("{") <= 1


def decode_uuid_cursor(cursor: str | None) -> uuid.UUID | None:
    if cursor is None:
        return None
    value = decode_cursor(cursor)
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidInput(_CURSOR_INVALID) from None


def page_limit(limit: int | None) -> int:
    if limit is None:
        return DEFAULT_PAGE
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}")
    return limit
