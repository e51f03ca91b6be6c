"""LangGraph's long-term memory (``BaseStore``) as memories in the tenant's bucket.

Namespaces map to memplane addresses, reversibly:

==========================================  ==========  ====================  ============
LangGraph namespace, key                    scope       scope_ref             data subject
==========================================  ==========  ====================  ============
``("users", uid, *rest)``, ``k``            ``user``    ``uid``               ``uid``
``(first, *rest)``, ``k`` (anything else)   ``app``     ``first``             none
==========================================  ==========  ====================  ============

(``uid`` and ``first`` as given, except that ``%``, control characters and a leading ``/``
are percent-encoded: a user id with those is the data subject in that encoded form), and
the memory's key is ``lg-store/<rest[0]>/…/<rest[-1]>/<k>``, every part encoded as in
``_wire.encode`` (``%``, ``/``, ``#`` and control characters percent-encoded; a part longer
than 64 bytes is replaced by ``#`` and 32 hex digits of its SHA-256). The value is JSON
``{"namespace": [...], "key": k, "value": {...}}``, so names are never lost. Erasing user
``uid`` removes everything the store held under ``("users", uid, ...)``.

Operations: ``batch``/``abatch`` send every get, put and delete of the batch in one
``POST /v1/memories:batch`` (operations on one item apply in batch order); a search without
a query is a listing with values (``GET /v1/pointers?include_values=true``, newest first, a
page at a time until the filter has kept enough); a namespace listing lists pointers only.

Differences from LangGraph's own stores, by design:

- ``search(filter=...)`` is evaluated on the client after a verified read of the candidates
  (memplane keeps no content in its control plane to filter on; a dotted key such as
  ``"user.level"`` is a path into nested values, as in LangGraph's stores, unless the value
  has that top-level key); results without a query are newest first (``updated_at``).
- ``search(query=...)`` ranks with the server's semantic search (``POST /v1/search``, hybrid
  vector + keyword, over what the server has embedded so far; ``SearchItem.score`` is its
  fused score), then reads the hits in one verified batch. On a server without semantic
  search, or with ``semantic=False``, the query is ignored, as LangGraph's stores ignore it
  without an index.
- ``ttl`` (minutes, LangGraph's ``TTLConfig.default_ttl`` or a put's own) becomes the
  memory's ``ttl_seconds`` (rounded up to a whole second). On a store made with
  ``refresh_on_read`` true, a get or search (unless ``refresh_ttl=False``) restarts it, as
  SqliteStore does (``refresh_ttl`` on the batch's get: the control plane's ``expires_at``
  moves, nothing is rewritten). Expired items read as missing at once; the server's retention
  run deletes them (there is no client-side ``sweep_ttl``). A put with ``ttl=None`` keeps an
  item's earlier expiry.
- What is embedded: an item put with ``index=False`` is written ``searchable: false`` (never
  embedded, never a search result); with the default ``index=None``, so is every item of a
  store made with ``semantic=False`` (LangGraph's stores embed nothing without an index
  configuration); otherwise the server embeds the whole value (per-field index paths are
  ignored).
- Namespace parts and keys are NFC-normalised by the server, like every memplane key.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from ..._async_client import AsyncClient
from ..._client import Client
from ..._exceptions import NotFound
from ..._layer_calls import memory_search
from ..._models import Pointer, SearchResults
from . import _wire
from ._wire import Step

__all__ = ["MemplaneStore"]

ROOT = "lg-store/"
USERS = "users"
PART_LIMIT = 64
TAG = "langgraph"
SECONDS_PER_MINUTE = 60


def _address(namespace: tuple[str, ...]) -> tuple[str, str, str | None, tuple[str, ...]]:
    """(scope, scope_ref, data subject, rest of the namespace)."""
    if len(namespace) >= 2 and namespace[0] == USERS:
        user = _wire.encode_ref(namespace[1])
        return "user", user, user, namespace[2:]
    if not namespace:
        raise ValueError("a namespace needs at least one label")
    return "app", _wire.encode_ref(namespace[0]), None, namespace[1:]


def _key(namespace: tuple[str, ...], key: str) -> tuple[str, str, str | None, str]:
    scope, scope_ref, subject, rest = _address(namespace)
    return scope, scope_ref, subject, _wire.join(ROOT, [*rest, key], limit=PART_LIMIT)


def _listings(prefix: tuple[str, ...]) -> list[dict[str, str | None]]:
    """The pointer listings that cover every item under ``prefix``."""
    if not prefix:
        return [{"scope": None, "scope_ref": None, "key_prefix": ROOT}]
    if prefix[0] == USERS and len(prefix) == 1:
        return [{"scope": "user", "scope_ref": None, "key_prefix": ROOT},
                {"scope": "app", "scope_ref": USERS, "key_prefix": ROOT}]
    scope, scope_ref, _, rest = _address(prefix)
    return [{"scope": scope, "scope_ref": scope_ref,
             "key_prefix": _wire.prefix_of(ROOT, rest, limit=PART_LIMIT)}]


def _names(pointer: Pointer) -> tuple[tuple[str, ...], str] | None:
    """The namespace and key a pointer stands for, from its address alone; None when a
    part is hashed (read the value) or the pointer is not the store's."""
    key = pointer.key or ""
    if not key.startswith(ROOT) or pointer.scope not in ("user", "app"):
        return None
    parts = key[len(ROOT):].split("/")
    if any(_wire.is_hashed(p) for p in parts):
        return None
    head = ((USERS, _wire.decode(pointer.scope_ref)) if pointer.scope == "user"
            else (_wire.decode(pointer.scope_ref),))
    return (*head, *(_wire.decode(p) for p in parts[:-1])), _wire.decode(parts[-1])


def _is_store_pointer(pointer: Pointer) -> bool:
    return (pointer.key or "").startswith(ROOT) and pointer.scope in ("user", "app")


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (zip(namespace, path, strict=False) if condition.match_type == "prefix"
             else zip(reversed(namespace), reversed(path), strict=False))
    return all(p == "*" or n == p for n, p in pairs)


def _compare(item_value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: equality, nested dicts, and $eq $ne $gt $gte $lt $lte."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(item_value, op, value) for op, value in wanted.items())
        return isinstance(item_value, dict) and all(
            _compare(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(item_value, (list, tuple)) and len(item_value) == len(wanted)
                and all(_compare(i, w) for i, w in zip(item_value, wanted, strict=False)))
    return bool(item_value == wanted)


def _at(value: dict[str, Any], key: str) -> Any:
    """The value a filter key names: the top-level key as it is, else a dotted path into
    nested dicts (``"user.access-level"``), as LangGraph's stores read filter keys."""
    if key in value or "." not in key:
        return value.get(key)
    found: Any = value
    for part in key.split("."):
        if not isinstance(found, dict):
            return None
        found = found.get(part)
    return found


def _passes(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return all(_compare(_at(value, k), v) for k, v in (wanted or {}).items())


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        if value is None:
            return False
        left, right = float(value), float(operand)
        return {"$gt": left > right, "$gte": left >= right,
                "$lt": left < right, "$lte": left <= right}[operator]
    raise ValueError(f"unsupported filter operator {operator!r}: use $eq, $ne, $gt, $gte, "
                     "$lt or $lte")


def _item(value: dict[str, Any], pointer: Pointer | None) -> Item:
    created = pointer.created_at if pointer else datetime.now().astimezone()
    updated = pointer.updated_at if pointer else created
    return Item(value=value["value"], key=value["key"], namespace=tuple(value["namespace"]),
                created_at=created, updated_at=updated)


def _found(value: dict[str, Any], pointer: Pointer | None,
           score: float | None = None) -> SearchItem:
    item = _item(value, pointer)
    return SearchItem(namespace=item.namespace, key=item.key, value=item.value,
                      created_at=item.created_at, updated_at=item.updated_at, score=score)


class MemplaneStore(BaseStore):
    """A LangGraph store over the memplane SDK.

    Give ``client`` (a ``memplane.Client``) for the sync methods, ``aclient`` (a
    ``memplane.AsyncClient``) for the async ones, or both; the caller owns and closes them.
    The key needs the agent or admin role (a scoped agent key sees only its scopes).
    ``semantic=False`` ignores search queries (filters and recency only), as does a server
    without ``POST /v1/search``, and writes items unsearchable unless a put asks for
    indexing (``index=True`` or field paths). ``ttl`` is LangGraph's ``TTLConfig``
    (``default_ttl`` in minutes, ``refresh_on_read``).
    """

    supports_ttl = True

    def __init__(self, client: Client | None = None, *,
                 aclient: AsyncClient | None = None, semantic: bool = True,
                 ttl: TTLConfig | None = None) -> None:
        if client is None and aclient is None:
            raise ValueError("give a memplane.Client (client=) or a memplane.AsyncClient "
                             "(aclient=), or both")
        self.client = client
        self.aclient = aclient
        self.semantic = semantic  # turned off for good if the server has no search
        self.embeds = semantic
        self.ttl_config = ttl

    # -- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations; gets, puts and deletes travel in one batch request."""
        if self.client is None:
            raise RuntimeError("this MemplaneStore has no memplane.Client for sync calls; "
                               "pass client= or use the async methods (a...)")
        step = self._batch(list(ops))
        return cast(list[Result], _wire.run_sync(self.client._send, step))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aclient is None:
            raise RuntimeError("this MemplaneStore has no memplane.AsyncClient for async "
                               "calls; pass aclient= or use the sync methods")
        step = self._batch(list(ops))
        return cast(list[Result], await _wire.run_async(self.aclient._send, step))

    # -- what a batch sends ---------------------------------------------------------------

    def _refreshes(self, op: GetOp | SearchOp) -> bool:
        """A read restarts the ttl when it asks (``refresh_ttl``, true unless said otherwise)
        and the store was made with ``refresh_on_read`` true, as LangGraph's SqliteStore
        does: a store that did not ask for it costs no control-plane write per read."""
        return bool(op.refresh_ttl and (self.ttl_config or {}).get("refresh_on_read", False))

    def _batch(self, ops: list[Op]) -> Step[list[Result]]:
        results: list[Result] = [None] * len(ops)
        wire: list[dict[str, Any]] = []
        answered: list[tuple[int, Op]] = []
        for index, op in enumerate(ops):
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                scope, ref, _, key = _key(op.namespace, op.key)
                get = {"op": "get", "scope": scope, "scope_ref": ref, "key": key}
                wire.append(get | {"refresh_ttl": True} if self._refreshes(op) else get)
                answered.append((index, op))
            elif isinstance(op, PutOp):
                wire.append(self._write(op))
                answered.append((index, op))
            elif not isinstance(op, (SearchOp, ListNamespacesOp)):
                raise ValueError(f"unknown store operation {type(op).__name__}")
        replies = yield from _wire.batch(wire)
        for (index, op), reply in zip(answered, replies, strict=True):
            if reply.status == 404:
                continue
            reply.raise_for_error()
            if isinstance(op, GetOp):
                results[index] = _item(reply.value, reply.pointer)
        for index, op in enumerate(ops):
            if isinstance(op, SearchOp):
                results[index] = yield from self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[index] = yield from self._list_namespaces(op)
        return results

    def _write(self, op: PutOp) -> dict[str, Any]:
        scope, ref, subject, key = _key(op.namespace, op.key)
        if op.value is None:
            return {"op": "delete", "scope": scope, "scope_ref": ref, "key": key}
        if not isinstance(op.value, dict):
            raise ValueError("a store value must be a dict (LangGraph's Item.value)")
        write: dict[str, Any] = {
            "op": "set", "scope": scope, "scope_ref": ref, "key": key,
            "value": {"namespace": list(op.namespace), "key": op.key, "value": op.value},
            "tags": [TAG]}
        if subject is not None:
            write["user_id"] = subject
        if op.ttl is not None:
            write["ttl_seconds"] = max(1, math.ceil(op.ttl * SECONDS_PER_MINUTE))
        # Each put decides, as in LangGraph: False never indexes, None follows the store.
        write["searchable"] = op.index is not False and (op.index is not None or self.embeds)
        return write

    def _pointers(self, prefix: tuple[str, ...]) -> Step[list[Pointer]]:
        found: list[Pointer] = []
        for listing in _listings(prefix):
            found.extend((yield from _wire.list_pointers(**listing)))
        return [p for p in found if _is_store_pointer(p)]

    def _read(self, pointers: list[Pointer]) -> Step[list[tuple[dict[str, Any], Pointer]]]:
        replies = yield from _wire.batch([{"op": "get", "scope": p.scope,
                                           "scope_ref": p.scope_ref, "key": p.key}
                                          for p in pointers])
        read = []
        for pointer, reply in zip(pointers, replies, strict=True):
            if reply.status == 404:  # deleted or expired meanwhile
                continue
            reply.raise_for_error()
            read.append((reply.value, pointer))
        return read

    def _search(self, op: SearchOp) -> Step[list[SearchItem]]:
        """Ranked hits first (with a query and semantic search), then, to fill the page as
        LangGraph's stores do for items not embedded yet, the other matches newest first."""
        if op.limit < 0 or op.offset < 0:
            raise ValueError("search limit and offset must not be negative")
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit
        ranked: list[tuple[SearchItem, tuple[str, str, str]]] = []
        if op.query and self.semantic:
            found = yield from self._semantic(op, prefix)
            if found is None:
                self.semantic = False
            else:
                ranked = found
        expiring: dict[int, Pointer] = {}
        if len(ranked) < wanted:
            skip = {where for _, where in ranked}
            recent = yield from self._recent(op, prefix, skip, wanted - len(ranked))
            for item, pointer in recent:
                if pointer.expires_at is not None:
                    expiring[len(ranked)] = pointer
                ranked.append((item, ("", "", "")))
        if self._refreshes(op):  # the listing read them; restart the ttl of those answered
            yield from _wire.batch([
                {"op": "get", "scope": p.scope, "scope_ref": p.scope_ref, "key": p.key,
                 "refresh_ttl": True}
                for n, p in expiring.items() if op.offset <= n < wanted])
        return [item for item, _ in ranked[op.offset:wanted]]

    def _recent(self, op: SearchOp, prefix: tuple[str, ...], skip: set[tuple[str, str, str]],
                count: int) -> Step[list[tuple[SearchItem, Pointer]]]:
        """The first ``count`` items under ``prefix`` passing the filter, newest first,
        leaving out the addresses in ``skip``: each listing's newest first with their values
        (``order=updated_desc``, ``include_values``), a page at a time until it has
        ``count``."""
        if count <= 0:
            return []
        found: list[tuple[SearchItem, str, Pointer]] = []
        for listing in _listings(prefix):
            cursor: str | None = None
            kept = 0
            while kept < count:
                page = yield _wire.memory_page(**listing, order="updated_desc",
                                               limit=min(_wire.VALUES_PAGE, max(count, 10)),
                                               cursor=cursor)
                for memory in page.items:
                    pointer, value = memory.pointer, memory.value
                    if ((pointer.scope, pointer.scope_ref, pointer.key or "") in skip
                            or not _is_store_pointer(pointer)
                            or tuple(value["namespace"])[:len(prefix)] != prefix
                            or not _passes(value["value"], op.filter)):
                        continue
                    found.append((_found(value, pointer), pointer.key or "", pointer))
                    kept += 1
                cursor = page.next_cursor
                if cursor is None:
                    break
        found.sort(key=lambda f: (f[0].updated_at, f[1]), reverse=True)
        return [(item, pointer) for item, _, pointer in found[:count]]

    def _semantic(self, op: SearchOp, prefix: tuple[str, ...],
                  ) -> Step[list[tuple[SearchItem, tuple[str, str, str]]] | None]:
        """Rank with the SDK's ``client.memory.search`` request (``POST /v1/search``, asking
        for more than the page, as the prefix and the filter trim the hits), then read the
        hits in one batch; each item with its address. None when the server has no semantic
        search."""
        assert op.query is not None
        listings = _listings(prefix)
        only = listings[0] if len(listings) == 1 else {}
        call = memory_search(query=op.query, scope=only.get("scope"),
                             scope_ref=only.get("scope_ref"), user_id=None, memory_type=None,
                             tags=[TAG], limit=min(100, max(10, (op.offset + op.limit) * 4)),
                             include_values=False)
        try:
            answer: SearchResults = yield call
        except NotFound:
            return None  # a server without semantic search
        hits = [hit for hit in answer.results
                if hit.kind == "memory" and hit.scope in ("user", "app")
                and (hit.key or "").startswith(ROOT)]
        refresh = {"refresh_ttl": True} if self._refreshes(op) else {}
        replies = yield from _wire.batch([{"op": "get", "scope": h.scope,
                                           "scope_ref": h.scope_ref, "key": h.key} | refresh
                                          for h in hits])
        items: list[tuple[SearchItem, tuple[str, str, str]]] = []
        for hit, reply in zip(hits, replies, strict=True):
            if reply.status == 404:  # deleted since it was ranked
                continue
            reply.raise_for_error()
            value, pointer = reply.value, reply.pointer
            if tuple(value["namespace"])[:len(prefix)] != prefix:
                continue
            if not _passes(value["value"], op.filter):
                continue
            items.append((_found(value, pointer, hit.score),
                          (hit.scope, hit.scope_ref, hit.key or "")))
        return items

    def _list_namespaces(self, op: ListNamespacesOp) -> Step[list[tuple[str, ...]]]:
        conditions = list(op.match_conditions or ())
        narrow: tuple[str, ...] = ()
        for condition in conditions:
            if condition.match_type == "prefix":
                fixed = []
                for part in condition.path:
                    if part == "*":
                        break
                    fixed.append(part)
                if len(fixed) > len(narrow):
                    narrow = tuple(fixed)
        pointers = yield from self._pointers(narrow)
        namespaces: set[tuple[str, ...]] = set()
        unnamed = []
        for pointer in pointers:
            names = _names(pointer)
            if names is None:
                unnamed.append(pointer)
            else:
                namespaces.add(names[0])
        for value, _ in (yield from self._read(unnamed)):
            namespaces.add(tuple(value["namespace"]))
        matching = {ns for ns in namespaces if all(_does_match(c, ns) for c in conditions)}
        if op.max_depth is not None:
            matching = {ns[:op.max_depth] for ns in matching}
        ordered = sorted(matching)
        return ordered[op.offset:op.offset + op.limit]
