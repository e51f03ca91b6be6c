"""LangGraph thread state (checkpoints and pending writes) as memories in the tenant's bucket.

Layout. A thread is the ``conversation`` scope with ``scope_ref`` = the thread id (encoded
as in ``_wire.encode``: ``%``, ``/``, ``#`` and control characters percent-encoded). In it:

- a checkpoint is the memory ``lg-checkpoint/<ns>/c/<checkpoint_id>``,
- a pending write is ``lg-checkpoint/<ns>/c/<checkpoint_id>/w/<task_id>/<idx>``, under its
  checkpoint's key (checkpoints written before writes were kept there carry no
  ``lg-layout:2`` tag, and their writes are at ``lg-checkpoint/<ns>/w/<checkpoint_id>/…``,
  where they are still read, pruned and deleted),

with ``<ns>`` the encoded ``checkpoint_ns`` ("" for the root graph). Each value is JSON
holding the serializer's typed bytes (base64) and the names in clear, so every read goes
through the pointer protocol: encrypted in the bucket, verified against its SHA-256,
audited. The data subject of everything a thread stores is ``configurable.user_id`` of the
config, else the ``user_id`` given to the checkpointer: that user's erasure removes the
thread state. A checkpoint carries the tags ``langgraph`` and ``lg-run:<run_id>`` (the
metadata's run id, hashed when longer than 56 characters), which ``delete_for_runs`` finds,
and ``lg-layout:2``. Processes that share a thread should all run a version that keeps
writes under their checkpoint: an older one would put a newer checkpoint's writes at the old
place, where a newer reader does not look for them.

Round trips: ``put`` and ``put_writes`` are one batch request each; ``get_tuple`` is a
listing plus one batch read, however long the thread: the namespace's checkpoint keys listed
by key, downwards, so the newest checkpoint (the greatest id, as LangGraph's ids sort) comes
first, after its own writes, whose keys extend its key; ``list`` one listing plus one batch
read per 50 checkpoints it yields.

Differs from ``PostgresSaver`` by design: a pending write sent again for the same
``(task_id, idx)`` replaces the first (LangGraph sends the same value again when it retries a
task); channel values are stored inside each checkpoint rather than deduplicated per
version.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..._async_client import AsyncClient
from ..._client import Client
from ..._models import Memory, Pointer
from . import _wire
from ._wire import Step

__all__ = ["MemplaneCheckpointer"]

SCOPE = "conversation"
ROOT = "lg-checkpoint/"
TAG = "langgraph"
RUN_TAG = "lg-run:"
NESTED_TAG = "lg-layout:2"  # its writes are under its own key
PART_LIMIT = 96  # bytes of one encoded ns / id component before it is hashed
LOAD_CHUNK = 50
FIRST_PAGE = 4  # keys (with values) listed first while looking for the newest checkpoint
LATEST_PAGE = 16  # and then at a time


def _typed(serde: SerializerProtocol, obj: Any) -> dict[str, str]:
    kind, data = serde.dumps_typed(obj)
    return {"type": kind, "data": base64.b64encode(data).decode()}


def _untyped(serde: SerializerProtocol, stored: dict[str, str]) -> Any:
    return serde.loads_typed((stored["type"], base64.b64decode(stored["data"])))


def _run_tag(run_id: str) -> str:
    text = str(run_id)
    if len(text) > 56 or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        text = "#" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return RUN_TAG + text


def _thread_ref(thread_id: str) -> str:
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError("configurable.thread_id must be a non-empty string")
    ref = _wire.encode(thread_id)
    if _wire.key_bytes(ref) > _wire.MAX_KEY_BYTES:
        raise ValueError(f"thread_id is too long for a memplane scope ref "
                         f"({_wire.MAX_KEY_BYTES} bytes once encoded); shorten it")
    return ref


def _ns_prefix(ns: str) -> str:
    return _wire.prefix_of(ROOT, [ns], limit=PART_LIMIT)


def _checkpoint_key(ns: str, checkpoint_id: str) -> str:
    return _wire.join(ROOT, [ns, "c", checkpoint_id], limit=PART_LIMIT)


def _write_key(ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    return _wire.join(ROOT, [ns, "c", checkpoint_id, "w", task_id, str(idx)],
                      limit=PART_LIMIT)


def _old_writes_prefix(ns_part: str, id_part: str) -> str:
    """Where a checkpoint without ``NESTED_TAG`` kept its writes (parts as in its key)."""
    return f"{ROOT}{ns_part}/w/{id_part}/"


@dataclass
class _Stored:
    """One thread's keys, parsed: checkpoints by (ns part, id part) and their writes."""

    thread_ref: str
    checkpoints: dict[tuple[str, str], Pointer] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[Pointer]] = field(default_factory=dict)


def _parse(pointers: list[Pointer]) -> dict[str, _Stored]:
    threads: dict[str, _Stored] = {}
    for pointer in pointers:
        key = pointer.key or ""
        if not key.startswith(ROOT):
            continue
        parts = key[len(ROOT):].split("/")
        stored = threads.setdefault(pointer.scope_ref, _Stored(pointer.scope_ref))
        if len(parts) == 3 and parts[1] == "c":
            stored.checkpoints[(parts[0], parts[2])] = pointer
        elif (len(parts) == 6 and parts[1] == "c" and parts[3] == "w") or (
                len(parts) == 5 and parts[1] == "w"):  # under its checkpoint, or as before
            stored.writes.setdefault((parts[0], parts[2]), []).append(pointer)
    return threads


def _order(threads: dict[str, _Stored]) -> list[tuple[_Stored, tuple[str, str]]]:
    """Checkpoints newest first by checkpoint id (then thread, namespace)."""
    found = [(stored, where) for stored in threads.values() for where in stored.checkpoints]
    found.sort(key=lambda item: (_wire.decode(item[1][1]), item[0].thread_ref, item[1][0]),
               reverse=True)
    return found


class MemplaneCheckpointer(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer over the memplane SDK.

    Give ``client`` (a ``memplane.Client``) for the sync methods, ``aclient`` (a
    ``memplane.AsyncClient``) for the async ones, or both; the caller owns and closes them.
    ``user_id`` is the data subject when a config carries no ``configurable.user_id``;
    ``ttl_days`` makes every checkpoint and write expire that many days after it is written.
    The key needs the agent or admin role (a scoped agent key needs the ``conversation``
    scope).
    """

    def __init__(self, client: Client | None = None, *, aclient: AsyncClient | None = None,
                 user_id: str | None = None, ttl_days: int | None = None,
                 serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        if client is None and aclient is None:
            raise ValueError("give a memplane.Client (client=) or a memplane.AsyncClient "
                             "(aclient=), or both")
        self.client = client
        self.aclient = aclient
        self.user_id = user_id
        self.ttl_days = ttl_days

    # -- drivers --------------------------------------------------------------------------

    def _run(self, step: Step[Any]) -> Any:
        if self.client is None:
            step.close()
            raise RuntimeError("this MemplaneCheckpointer has no memplane.Client for sync "
                               "calls; pass client= or use the async methods (a...)")
        return _wire.run_sync(self.client._send, step)

    async def _arun(self, step: Step[Any]) -> Any:
        if self.aclient is None:
            step.close()
            raise RuntimeError("this MemplaneCheckpointer has no memplane.AsyncClient for "
                               "async calls; pass aclient= or use the sync methods")
        return await _wire.run_async(self.aclient._send, step)

    # -- what each method sends -----------------------------------------------------------

    def _subject(self, config: RunnableConfig | None) -> str | None:
        configurable = (config or {}).get("configurable") or {}
        user = configurable.get("user_id") or self.user_id
        return str(user) if user else None

    def _set(self, thread_ref: str, key: str, value: Any, user_id: str | None,
             memory_type: str, tags: list[str]) -> dict[str, Any]:
        # Checkpoints and writes are the graph's state, not knowledge: never embedded, never
        # among search results (or an assembled context).
        op: dict[str, Any] = {"op": "set", "scope": SCOPE, "scope_ref": thread_ref,
                              "key": key, "value": value, "memory_type": memory_type,
                              "tags": tags, "searchable": False}
        if user_id:
            op["user_id"] = user_id
        if self.ttl_days is not None:
            op["ttl_days"] = self.ttl_days
        return op

    def _put(self, config: RunnableConfig, checkpoint: Checkpoint,
             metadata: CheckpointMetadata) -> Step[RunnableConfig]:
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = checkpoint["id"]
        full_metadata = get_checkpoint_metadata(config, metadata)
        value = {
            "thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": configurable.get("checkpoint_id"),
            "checkpoint": _typed(self.serde, checkpoint),
            "metadata": _typed(self.serde, full_metadata),
        }
        tags = [TAG, NESTED_TAG]
        run_id = full_metadata.get("run_id")
        if run_id:
            tags.append(_run_tag(str(run_id)))
        op = self._set(_thread_ref(thread_id), _checkpoint_key(ns, checkpoint_id), value,
                       self._subject(config), "langgraph_checkpoint", tags)
        _wire.checked((yield from _wire.batch([op])))
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint_id}}

    def _put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                    task_id: str, task_path: str) -> Step[None]:
        configurable = config["configurable"]
        thread_ref = _thread_ref(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        user_id = self._subject(config)
        ops = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            stored = {"task_id": task_id, "task_path": task_path, "idx": idx,
                      "channel": channel, "value": _typed(self.serde, value)}
            ops.append(self._set(thread_ref, _write_key(ns, checkpoint_id, task_id, idx),
                                 stored, user_id, "langgraph_write", [TAG]))
        _wire.checked((yield from _wire.batch(ops)))

    def _load(self, chosen: list[tuple[_Stored, tuple[str, str]]]) -> Step[list[CheckpointTuple]]:
        """Read the chosen checkpoints and their writes in one batch."""
        ops: list[dict[str, Any]] = []
        spans = []
        for stored, where in chosen:
            pointers = [stored.checkpoints[where], *stored.writes.get(where, [])]
            spans.append((len(ops), len(pointers)))
            ops.extend({"op": "get", "scope": SCOPE, "scope_ref": p.scope_ref, "key": p.key}
                       for p in pointers)
        results = _wire.checked((yield from _wire.batch(ops)), missing_ok=True)
        tuples = []
        for start, count in spans:
            head = results[start]
            if not head.ok:  # deleted meanwhile
                continue
            writes = [r.value for r in results[start + 1:start + count] if r.ok]
            tuples.append(self._tuple(head.value, writes))
        return tuples

    def _tuple(self, value: dict[str, Any], writes: list[dict[str, Any]]) -> CheckpointTuple:
        thread_id, ns = value["thread_id"], value["checkpoint_ns"]
        writes.sort(key=lambda w: (w.get("task_path", ""), w["task_id"], w["idx"]))
        pending: list[PendingWrite] = [
            (w["task_id"], w["channel"], _untyped(self.serde, w["value"])) for w in writes]
        parent = value.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": value["checkpoint_id"]}},
            checkpoint=_untyped(self.serde, value["checkpoint"]),
            metadata=_untyped(self.serde, value["metadata"]),
            parent_config=({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                             "checkpoint_id": parent}} if parent else None),
            pending_writes=pending,
        )

    def _get_tuple(self, config: RunnableConfig) -> Step[CheckpointTuple | None]:
        configurable = config["configurable"]
        thread_ref = _thread_ref(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        wanted = get_checkpoint_id(config)
        if wanted is not None:
            # Named: its key lists it and its writes (and keys of longer ids: left out), with
            # their values.
            key = _checkpoint_key(ns, wanted)
            found = yield from _wire.list_memories(scope=SCOPE, scope_ref=thread_ref,
                                                   key_prefix=key)
            head = next((m for m in found if m.pointer.key == key), None)
            if head is None:
                return None
            return (yield from self._loaded(
                head, [m for m in found if (m.pointer.key or "").startswith(key + "/w/")]))
        # The newest: the namespace's checkpoint keys by key, downwards, with their values; a
        # checkpoint's writes (keys that extend its key) come just before it. The first page
        # is short: the newest checkpoint of a thread between steps has no writes yet.
        prefix = _wire.prefix_of(ROOT, [ns, "c"], limit=PART_LIMIT)
        writes: dict[str, list[Memory]] = {}
        cursor: str | None = None
        limit = FIRST_PAGE
        while True:
            page = yield _wire.memory_page(scope=SCOPE, scope_ref=thread_ref, key_prefix=prefix,
                                           order="key_desc", limit=limit, cursor=cursor)
            for memory in page.items:
                parts = (memory.pointer.key or "")[len(prefix):].split("/")
                if len(parts) == 1:
                    return (yield from self._loaded(memory, writes.get(parts[0], [])))
                if len(parts) == 4 and parts[1] == "w":
                    writes.setdefault(parts[0], []).append(memory)
            cursor, limit = page.next_cursor, LATEST_PAGE
            if cursor is None:
                return None

    def _loaded(self, head: Memory, writes: list[Memory]) -> Step[CheckpointTuple | None]:
        """The checkpoint ``head`` with ``writes``, as listed with their values; one stored
        before writes were kept under its key is read again with those at the old place."""
        if NESTED_TAG not in head.pointer.tags:
            return (yield from self._load_one(head.pointer, [w.pointer for w in writes]))
        return self._tuple(head.value, [w.value for w in writes])

    def _load_one(self, head: Pointer, writes: list[Pointer]
                     ) -> Step[CheckpointTuple | None]:
        """The checkpoint ``head`` with ``writes`` (and, for one stored before writes were
        kept under its key, those at the old place), read in one batch."""
        assert head.key is not None
        ns_part, _, id_part = head.key[len(ROOT):].split("/")
        if NESTED_TAG not in head.tags:
            writes = writes + (yield from _wire.list_pointers(
                scope=SCOPE, scope_ref=head.scope_ref,
                key_prefix=_old_writes_prefix(ns_part, id_part)))
        stored = _Stored(head.scope_ref, {(ns_part, id_part): head},
                         {(ns_part, id_part): writes})
        loaded = yield from self._load([(stored, (ns_part, id_part))])
        return loaded[0] if loaded else None

    def _list(self, config: RunnableConfig | None, filter: dict[str, Any] | None,
              before: RunnableConfig | None, limit: int | None,
              ) -> Iterator[Step[list[CheckpointTuple]]]:
        """Steps, each yielding the next batch of matching tuples (newest first)."""
        configurable = (config or {}).get("configurable") or {}
        thread_id = configurable.get("thread_id")
        ns = configurable.get("checkpoint_ns")
        wanted = configurable.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        prefix = _ns_prefix(ns) if ns is not None else ROOT
        remaining = [limit]

        def listing() -> Step[list[tuple[_Stored, tuple[str, str]]]]:
            pointers = yield from _wire.list_pointers(
                scope=SCOPE, scope_ref=_thread_ref(thread_id) if thread_id else None,
                key_prefix=prefix)
            ordered = _order(_parse(pointers))
            if wanted:
                ordered = [o for o in ordered if _wire.decode(o[1][1]) == wanted]
            if before_id:
                ordered = [o for o in ordered if _wire.decode(o[1][1]) < before_id]
            return ordered

        ordered: list[tuple[_Stored, tuple[str, str]]] = []
        yield _collect(listing(), ordered)
        for start in range(0, len(ordered), LOAD_CHUNK):
            if remaining[0] is not None and remaining[0] <= 0:
                return

            def chunk(start: int = start) -> Step[list[CheckpointTuple]]:
                loaded = yield from self._load(ordered[start:start + LOAD_CHUNK])
                kept = []
                for tup in loaded:
                    if ns is not None and tup.config["configurable"]["checkpoint_ns"] != ns:
                        continue  # a hashed namespace that only shares the prefix
                    if filter and not all(tup.metadata.get(k) == v for k, v in filter.items()):
                        continue
                    if remaining[0] is not None:
                        if remaining[0] <= 0:
                            break
                        remaining[0] -= 1
                    kept.append(tup)
                return kept

            yield chunk()

    def _delete(self, pointers: list[Pointer]) -> Step[None]:
        ops = [{"op": "delete", "scope": p.scope, "scope_ref": p.scope_ref, "key": p.key}
               for p in pointers]
        _wire.checked((yield from _wire.batch(ops)), missing_ok=True)

    def _delete_thread(self, thread_id: str) -> Step[None]:
        pointers = yield from _wire.list_pointers(scope=SCOPE, scope_ref=_thread_ref(thread_id),
                                                  key_prefix=ROOT)
        yield from self._delete(pointers)

    def _delete_for_runs(self, run_ids: Sequence[str]) -> Step[None]:
        doomed: list[Pointer] = []
        for run_id in run_ids:
            tagged = yield from _wire.list_pointers(scope=SCOPE, tag=_run_tag(str(run_id)),
                                                    key_prefix=ROOT)
            for pointer in tagged:
                doomed.append(pointer)
                assert pointer.key is not None
                ns_part, _, id_part = pointer.key[len(ROOT):].split("/")
                for prefix in (pointer.key + "/w/", _old_writes_prefix(ns_part, id_part)):
                    writes = yield from _wire.list_pointers(
                        scope=SCOPE, scope_ref=pointer.scope_ref, key_prefix=prefix)
                    doomed.extend(writes)
        yield from self._delete(doomed)

    def _copy_thread(self, source_thread_id: str, target_thread_id: str) -> Step[None]:
        source = _thread_ref(source_thread_id)
        target = _thread_ref(target_thread_id)
        pointers = yield from _wire.list_pointers(scope=SCOPE, scope_ref=source,
                                                  key_prefix=ROOT)
        for start in range(0, len(pointers), _wire.PAGE):
            chunk = pointers[start:start + _wire.PAGE]
            read = _wire.checked((yield from _wire.batch(
                [{"op": "get", "scope": SCOPE, "scope_ref": source, "key": p.key}
                 for p in chunk])), missing_ok=True)
            ops = []
            for pointer, result in zip(chunk, read, strict=True):
                if not result.ok:
                    continue
                value = result.value
                if "thread_id" in value:
                    value = {**value, "thread_id": target_thread_id}
                assert pointer.key is not None
                ops.append(self._set(target, pointer.key, value, pointer.user_id,
                                     pointer.memory_type or "langgraph_checkpoint",
                                     list(pointer.tags)))
            _wire.checked((yield from _wire.batch(ops)))

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> Step[None]:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or "
                             "'delete'")
        doomed: list[Pointer] = []
        for thread_id in thread_ids:
            thread_ref = _thread_ref(thread_id)
            pointers = yield from _wire.list_pointers(scope=SCOPE, scope_ref=thread_ref,
                                                      key_prefix=ROOT)
            if strategy == "delete":
                doomed.extend(pointers)
                continue
            stored = _parse(pointers).get(thread_ref)
            if stored is None:
                continue
            latest: dict[str, tuple[str, str]] = {}
            for _, where in _order({thread_ref: stored}):
                latest.setdefault(where[0], where)
            keep = set(latest.values())
            for where, pointer in stored.checkpoints.items():
                if where not in keep:
                    doomed.append(pointer)
                    doomed.extend(stored.writes.get(where, []))
            for where, writes in stored.writes.items():
                if where not in stored.checkpoints:
                    doomed.extend(writes)  # writes whose checkpoint is gone
        yield from self._delete(doomed)

    # -- BaseCheckpointSaver ----------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (the newest of its thread and namespace when
        it names none), with its pending writes; None if there is none."""
        result: CheckpointTuple | None = self._run(self._get_tuple(config))
        return result

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        result: CheckpointTuple | None = await self._arun(self._get_tuple(config))
        return result

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None,
             ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id), of the config's thread (all threads
        when ``config`` is None) and namespace (all when it names none), whose metadata
        matches every key of ``filter``, older than ``before``, at most ``limit``."""
        for step in self._list(config, filter, before, limit):
            yield from self._run(step)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None,
                    ) -> AsyncIterator[CheckpointTuple]:
        for step in self._list(config, filter, before, limit):
            for tup in await self._arun(step):
                yield tup

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Store the checkpoint (one request); returns the config naming it."""
        result: RunnableConfig = self._run(self._put(config, checkpoint, metadata))
        return result

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions,
                   ) -> RunnableConfig:
        result: RunnableConfig = await self._arun(self._put(config, checkpoint, metadata))
        return result

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store a task's writes against the config's checkpoint (one request)."""
        self._run(self._put_writes(config, writes, task_id, task_path))

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await self._arun(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of the thread (other memories of the
        conversation stay)."""
        self._run(self._delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata names one of ``run_ids``, with their
        writes, in every thread."""
        self._run(self._delete_for_runs(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._arun(self._delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another (same subject)."""
        self._run(self._copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(self._copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest`` keeps each namespace's newest checkpoint and its writes;
        ``delete`` removes all. Not aware of ``DeltaChannel`` ancestors (see LangGraph's
        note on ``prune``)."""
        self._run(self._prune(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._arun(self._prune(thread_ids, strategy))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as InMemorySaver makes them: a zero-padded counter and a random part,
        so they sort as strings."""
        import random

        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"


def _collect(step: Step[list[Any]], into: list[Any]) -> Step[list[Any]]:
    """Run ``step`` and put its answer in ``into``; answers an empty batch of tuples."""
    into.extend((yield from step))
    return []
