"""Where and how the LangGraph checkpointer keeps thread state: keys, tags and values.

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
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from ..._models import Pointer
from . import _wire

SCOPE = "conversation"
ROOT = "lg-checkpoint/"
TAG = "langgraph"
RUN_TAG = "lg-run:"
NESTED_TAG = "lg-layout:2"  # its writes are under its own key
PART_LIMIT = 96  # bytes of one encoded ns / id component before it is hashed


def typed(serde: SerializerProtocol, obj: Any) -> dict[str, str]:
    kind, data = serde.dumps_typed(obj)
    return {"type": kind, "data": base64.b64encode(data).decode()}


def untyped(serde: SerializerProtocol, stored: dict[str, str]) -> Any:
    return serde.loads_typed((stored["type"], base64.b64decode(stored["data"])))


def run_tag(run_id: str) -> str:
    text = str(run_id)
    if len(text) > 56 or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        text = "#" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return RUN_TAG + text


def scope_ref_of(thread_id: str) -> str:
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError("configurable.thread_id must be a non-empty string")
    ref = _wire.encode(thread_id)
    if _wire.key_bytes(ref) > _wire.MAX_KEY_BYTES:
        raise ValueError(f"thread_id is too long for a memplane scope ref "
                         f"({_wire.MAX_KEY_BYTES} bytes once encoded); shorten it")
    return ref


def ns_prefix(ns: str) -> str:
    return _wire.prefix_of(ROOT, [ns], limit=PART_LIMIT)


def checkpoint_key(ns: str, checkpoint_id: str) -> str:
    return _wire.join(ROOT, [ns, "c", checkpoint_id], limit=PART_LIMIT)


def write_key(ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    return _wire.join(ROOT, [ns, "c", checkpoint_id, "w", task_id, str(idx)],
                      limit=PART_LIMIT)


def old_writes_prefix(ns_part: str, id_part: str) -> str:
    """Where a checkpoint without ``NESTED_TAG`` kept its writes (parts as in its key)."""
    return f"{ROOT}{ns_part}/w/{id_part}/"


@dataclass
class Stored:
    """One thread's keys, parsed: checkpoints by (ns part, id part) and their writes."""

    thread_ref: str
    checkpoints: dict[tuple[str, str], Pointer] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[Pointer]] = field(default_factory=dict)


def parse(pointers: list[Pointer]) -> dict[str, Stored]:
    threads: dict[str, Stored] = {}
    for pointer in pointers:
        key = pointer.key or ""
        if not key.startswith(ROOT):
            continue
        parts = key[len(ROOT):].split("/")
        stored = threads.setdefault(pointer.scope_ref, Stored(pointer.scope_ref))
        if len(parts) == 3 and parts[1] == "c":
            stored.checkpoints[(parts[0], parts[2])] = pointer
        elif (len(parts) == 6 and parts[1] == "c" and parts[3] == "w") or (
                len(parts) == 5 and parts[1] == "w"):  # under its checkpoint, or as before
            stored.writes.setdefault((parts[0], parts[2]), []).append(pointer)
    return threads


def order(threads: dict[str, Stored]) -> list[tuple[Stored, tuple[str, str]]]:
    """Checkpoints newest first by checkpoint id (then thread, namespace)."""
    found = [(stored, where) for stored in threads.values() for where in stored.checkpoints]
    found.sort(key=lambda item: (_wire.decode(item[1][1]), item[0].thread_ref, item[1][0]),
               reverse=True)
    return found
