"""What each method of the LangGraph checkpointer sends: steps (``_wire.Step``) written once,
which the checkpointer runs with its sync or its async client.

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

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from ..._models import Memory, Pointer
from . import _wire
from ._checkpoint_layout import (
    NESTED_TAG,
    PART_LIMIT,
    ROOT,
    SCOPE,
    TAG,
    Stored,
    checkpoint_key,
    ns_prefix,
    old_writes_prefix,
    order,
    parse,
    run_tag,
    scope_ref_of,
    typed,
    untyped,
    write_key,
)
from ._wire import Step

LOAD_CHUNK = 50
FIRST_PAGE = 4  # keys (with values) listed first while looking for the newest checkpoint
LATEST_PAGE = 16  # and then at a time


class CheckpointSteps(BaseCheckpointSaver[str]):
    """The steps of :class:`MemplaneCheckpointer`'s methods; the subject and expiry of what
    they write are the checkpointer's ``user_id`` and ``ttl_days``."""

    user_id: str | None
    ttl_days: int | None

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
            "checkpoint": typed(self.serde, checkpoint),
            "metadata": typed(self.serde, full_metadata),
        }
        tags = [TAG, NESTED_TAG]
        run_id = full_metadata.get("run_id")
        if run_id:
            tags.append(run_tag(str(run_id)))
        op = self._set(scope_ref_of(thread_id), checkpoint_key(ns, checkpoint_id), value,
                       self._subject(config), "langgraph_checkpoint", tags)
        _wire.checked((yield from _wire.batch([op])))
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                 "checkpoint_id": checkpoint_id}}

    def _put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                    task_id: str, task_path: str) -> Step[None]:
        configurable = config["configurable"]
        thread_ref = scope_ref_of(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        user_id = self._subject(config)
        ops = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            stored = {"task_id": task_id, "task_path": task_path, "idx": idx,
                      "channel": channel, "value": typed(self.serde, value)}
            ops.append(self._set(thread_ref, write_key(ns, checkpoint_id, task_id, idx),
                                 stored, user_id, "langgraph_write", [TAG]))
        _wire.checked((yield from _wire.batch(ops)))

    def _load(self, chosen: list[tuple[Stored, tuple[str, str]]]) -> Step[list[CheckpointTuple]]:
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
            (w["task_id"], w["channel"], untyped(self.serde, w["value"])) for w in writes]
        parent = value.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": value["checkpoint_id"]}},
            checkpoint=untyped(self.serde, value["checkpoint"]),
            metadata=untyped(self.serde, value["metadata"]),
            parent_config=({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                                             "checkpoint_id": parent}} if parent else None),
            pending_writes=pending,
        )

    def _get_tuple(self, config: RunnableConfig) -> Step[CheckpointTuple | None]:
        configurable = config["configurable"]
        thread_ref = scope_ref_of(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        wanted = get_checkpoint_id(config)
        if wanted is not None:
            # Named: its key lists it and its writes (and keys of longer ids: left out), with
            # their values.
            key = checkpoint_key(ns, wanted)
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
                key_prefix=old_writes_prefix(ns_part, id_part)))
        stored = Stored(head.scope_ref, {(ns_part, id_part): head},
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
        prefix = ns_prefix(ns) if ns is not None else ROOT
        remaining = [limit]

        def listing() -> Step[list[tuple[Stored, tuple[str, str]]]]:
            pointers = yield from _wire.list_pointers(
                scope=SCOPE, scope_ref=scope_ref_of(thread_id) if thread_id else None,
                key_prefix=prefix)
            ordered = order(parse(pointers))
            if wanted:
                ordered = [o for o in ordered if _wire.decode(o[1][1]) == wanted]
            if before_id:
                ordered = [o for o in ordered if _wire.decode(o[1][1]) < before_id]
            return ordered

        ordered: list[tuple[Stored, tuple[str, str]]] = []
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
        pointers = yield from _wire.list_pointers(scope=SCOPE, scope_ref=scope_ref_of(thread_id),
                                                  key_prefix=ROOT)
        yield from self._delete(pointers)

    def _delete_for_runs(self, run_ids: Sequence[str]) -> Step[None]:
        doomed: list[Pointer] = []
        for run_id in run_ids:
            tagged = yield from _wire.list_pointers(scope=SCOPE, tag=run_tag(str(run_id)),
                                                    key_prefix=ROOT)
            for pointer in tagged:
                doomed.append(pointer)
                assert pointer.key is not None
                ns_part, _, id_part = pointer.key[len(ROOT):].split("/")
                for prefix in (pointer.key + "/w/", old_writes_prefix(ns_part, id_part)):
                    writes = yield from _wire.list_pointers(
                        scope=SCOPE, scope_ref=pointer.scope_ref, key_prefix=prefix)
                    doomed.extend(writes)
        yield from self._delete(doomed)

    def _copy_thread(self, source_thread_id: str, target_thread_id: str) -> Step[None]:
        source = scope_ref_of(source_thread_id)
        target = scope_ref_of(target_thread_id)
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
            thread_ref = scope_ref_of(thread_id)
            pointers = yield from _wire.list_pointers(scope=SCOPE, scope_ref=thread_ref,
                                                      key_prefix=ROOT)
            if strategy == "delete":
                doomed.extend(pointers)
                continue
            stored = parse(pointers).get(thread_ref)
            if stored is None:
                continue
            latest: dict[str, tuple[str, str]] = {}
            for _, where in order({thread_ref: stored}):
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


def _collect(step: Step[list[Any]], into: list[Any]) -> Step[list[Any]]:
    """Run ``step`` and put its answer in ``into``; answers an empty batch of tuples."""
    into.extend((yield from step))
    return []
