"""Many memories in few requests: ``POST /v1/memories:batch``, shared by both clients.

``set_many`` and ``get_many`` send up to :data:`MAX_OPERATIONS` operations per request (more
are split into several requests, in order) and return one :class:`BatchResult` per item, in
the order given. An item's failure is not raised: it is in its result (``ok`` is False,
``error`` and ``detail`` say what to fix); ``raise_for_error()`` raises the exception the
single call would have raised. Operations on one address apply in the order given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import httpx
from pydantic import Field, ValidationError

from ._base import Call, _idempotency, _json
from ._exceptions import _BY_CODE, _BY_STATUS, APIError, InvalidResponse, ServerError
from ._models import Pointer, _Model

__all__ = ["MAX_OPERATIONS", "BatchResult"]

MAX_OPERATIONS = 1000

_SINGLETON_SCOPES = frozenset({"tenant", "institutional"})
_SET_FIELDS = frozenset({"scope", "scope_ref", "key", "value", "memory_type", "tags",
                         "importance", "title", "user_id", "agent_id", "ttl_days", "source"})
_GET_FIELDS = frozenset({"scope", "scope_ref", "key"})


class BatchResult(_Model):
    """What happened to one item of a batch: ``status`` is the HTTP status its single
    request would have answered (200 set/get, 204 delete, 4xx/5xx on failure)."""

    index: int = Field(description="The item's position in the list given (from 0).")
    op: str
    status: int
    pointer: Pointer | None = None
    value: Any = None
    error: str | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def exception(self) -> APIError | None:
        """The exception the single request would have raised; None if the item succeeded."""
        if self.ok:
            return None
        cls = _BY_STATUS.get(self.status) or (ServerError if self.status >= 500 else APIError)
        refined = _BY_CODE.get(self.error or "")
        if refined is not None and issubclass(refined, cls):
            cls = refined
        return cls(self.status, code=self.error, detail=self.detail,
                   body=self.model_dump(exclude={"index", "op", "status", "pointer", "value"},
                                        exclude_none=True))

    def raise_for_error(self) -> BatchResult:
        """Raise the single request's exception if this item failed; else return self."""
        error = self.exception()
        if error is not None:
            raise error
        return self


def _operation(op: str, item: Mapping[str, Any] | Sequence[Any], allowed: frozenset[str],
               position: int) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        if op != "get" or len(item) != 3:
            raise TypeError(f"item {position}: give a mapping with scope, scope_ref, key"
                            + (", value" if op == "set" else "")
                            + (" (or a (scope, scope_ref, key) tuple)" if op == "get" else ""))
        scope, scope_ref, key = item
        item = {"scope": scope, "scope_ref": scope_ref, "key": key}
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise TypeError(f"item {position}: unexpected field(s) {', '.join(unknown)} for {op}")
    body = {name: value for name, value in item.items()
            if value is not None or name == "value"}
    if body.get("scope_ref") is None and body.get("scope") in _SINGLETON_SCOPES:
        body["scope_ref"] = "-"
    return {"op": op, **body}


def operations(op: str, items: Iterable[Mapping[str, Any] | Sequence[Any]]) -> list[dict[str, Any]]:
    allowed = _SET_FIELDS if op == "set" else _GET_FIELDS
    return [_operation(op, item, allowed, n) for n, item in enumerate(items)]


def _parse(offset: int) -> Callable[[httpx.Response], list[BatchResult]]:
    def parse(response: httpx.Response) -> list[BatchResult]:
        data = _json(response)
        try:
            results = [BatchResult.model_validate(r) for r in data["results"]]
        except (KeyError, TypeError, ValidationError) as exc:
            raise InvalidResponse(f"POST /v1/memories:batch: answer does not match "
                                  f"{{'results': [BatchResult]}}: {exc}") from exc
        return [r.model_copy(update={"index": r.index + offset}) for r in results]
    return parse


def calls(ops: list[dict[str, Any]], idempotency_key: str | None) -> list[Call[list[BatchResult]]]:
    """One call per chunk of :data:`MAX_OPERATIONS`; a chunk's idempotency key is the key
    given, followed by ``#<chunk number>`` from the second chunk on."""
    chunks = []
    for number, start in enumerate(range(0, len(ops), MAX_OPERATIONS)):
        key = idempotency_key
        if key is not None and number:
            key = f"{key}#{number}"
        chunks.append(Call("POST", "/v1/memories:batch", _parse(start),
                           json={"operations": ops[start:start + MAX_OPERATIONS]},
                           headers=_idempotency(key)))
    return chunks
