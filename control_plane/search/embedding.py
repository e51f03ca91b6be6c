"""Embedding a batch of pointers after their commit (the indexer's steps 1-5 for one
tenant): their content read back and verified, their texts embedded in one call, each vector
sealed and put beside its content (``<content path>.vec``), recorded on its pointer only if
the pointer is still at the version embedded, and one delta segment per scope."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.orm import Session

from storage_adapters import base as storage

from ..db.engine import begin_write
from ..db.models import MemoryPointer
from ..embedders.service import embedder_for
from ..keys import subject_keys as keys
from ..memories.batch_sets import all_near
from ..memories.search_objects import vector_path
from ..plane.data_plane import DataPlane
from ..plane.shared_pool import SharedPool
from . import codec, index_rows, store
from .content_reads import fetch_content, live_keys, verified_text
from .segment_writing import delete_paths, write_delta

if TYPE_CHECKING:
    from ..embedders import Running
    from ..settings import Settings

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class RoundReport:
    """What an indexing round did (``indexer.index_round``); ``embed_batch`` counts its part."""

    embedded: int = 0
    skipped: int = 0
    corrupt: int = 0
    deltas: int = 0
    compacted: int = 0
    failed_tenants: int = 0


def _io(pool: SharedPool | None, plane: DataPlane, tenant_id: uuid.UUID,
        fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn(item)`` for each item, side by side on the pool if there is one. ``fn`` uses no
    session (sessions are not shared between threads): object I/O and sealing only."""
    if pool is None or len(items) < 2:
        return [fn(item) for item in items]
    return pool.map(tenant_id, plane.bulkheads, fn, items)


def embed_batch(session: Session, plane: DataPlane, runtime: Running | Settings,
                pointers: Sequence[MemoryPointer], report: RoundReport, *,
                pool: SharedPool | None = None) -> set[tuple[str, str]]:
    """Steps 1-5 for one tenant's pointers; the scopes that got a delta."""
    if not pointers:
        return set()
    tenant_id = pointers[0].tenant_id
    embedder = embedder_for(session, runtime, tenant_id)
    targets = {config_id: plane.by_id(session, config_id)
               for config_id in {p.storage_config_id for p in pointers}}
    session.commit()
    texts: list[str] = []
    todo: list[MemoryPointer] = []
    # The reads side by side on the pool; the keys they need in one query; opening and
    # verifying here, in this session (a failure is recorded as a read's would be).
    # A local directory's objects are read in this thread: a hand-off to the pool costs more
    # than the read (as a batch's gets do, ``all_near``).
    near = all_near(t.adapter for t in targets.values())
    blobs = _io(None if near else pool, plane, tenant_id,
                lambda p: fetch_content(targets[p.storage_config_id], p), pointers)
    live = live_keys(session, tenant_id, blobs)
    for pointer, blob in zip(pointers, blobs, strict=True):
        text = verified_text(session, plane, pointer, blob, live)
        if text is None:
            report.corrupt += 1
            continue
        texts.append(text)
        todo.append(pointer)
    if not todo:
        return set()
    vectors = embedder.embed(texts)
    handles: dict[tuple[str, str], keys.SubjectKeyHandle | None] = {}
    for pointer in todo:  # each subject's key once, before the puts (created if need be)
        subject = keys.subject_of(pointer.scope_type, pointer.scope_ref,
                                  pointer.subject_user_id)
        if subject not in handles:
            handles[subject] = store.vector_key(session, plane, pointer)

    def rows_of(i: int, pointer: MemoryPointer) -> codec.Rows:
        return codec.Rows(embedder.name, [pointer.id], [pointer.version], [texts[i]],
                          vectors[i:i + 1])

    def handle_of(pointer: MemoryPointer) -> keys.SubjectKeyHandle | None:
        return handles[keys.subject_of(pointer.scope_type, pointer.scope_ref,
                                       pointer.subject_user_id)]

    def put_one(item: tuple[int, MemoryPointer]) -> str:
        i, pointer = item
        # put_vector seals and puts; it runs no SQL (the session is not used off-thread).
        return store.put_vector(session, plane, targets[pointer.storage_config_id],
                                pointer, rows_of(i, pointer), handle_of(pointer))

    # Vectors bound for a bucket that stores many objects together go in one call per
    # bucket; the others side by side on the pool.
    batch_adapter = {config_id: isinstance(target.adapter, storage.BatchAdapter)
                     for config_id, target in targets.items()}
    together = [(i, p) for i, p in enumerate(todo) if batch_adapter[p.storage_config_id]]
    for config_id in dict.fromkeys(p.storage_config_id for _, p in together):
        store.put_vectors(targets[config_id], [
            store.seal_vector(plane, p, rows_of(i, p), handle_of(p))
            for i, p in together if p.storage_config_id == config_id])
    stored = {i for i, _ in together}
    _io(pool, plane, tenant_id, put_one,
        [(i, p) for i, p in enumerate(todo) if i not in stored])
    paths = [vector_path(p.storage_path) for p in todo]
    put = [(pointer, path, i) for i, (pointer, path) in enumerate(zip(todo, paths,
                                                                     strict=True))]
    begin_write(session)
    marked = index_rows.mark_vectors(
        session, [(p.id, p.version, p.storage_path) for p, _, _ in put], embedder.name)
    session.commit()
    adopted: list[tuple[MemoryPointer, int]] = []
    superseded: list[tuple[uuid.UUID, str]] = []
    unadopted: list[tuple[uuid.UUID, str]] = []
    for pointer, path, i in put:
        if (pointer.id, pointer.version) in marked:
            adopted.append((pointer, i))
            old = pointer.embedding_storage_path
            if old and old != path:
                superseded.append((pointer.storage_config_id, old))
        else:
            unadopted.append((pointer.storage_config_id, path))
    delete_paths(session, plane, superseded + unadopted)
    report.embedded += len(adopted)
    report.skipped += len(unadopted)
    # A scope's segments are kept per storage configuration: vectors and texts of memories
    # in one bucket (an agent's, in its region) never land in another.
    by_scope: dict[tuple[str, str, uuid.UUID], list[tuple[MemoryPointer, int]]] = (
        defaultdict(list))
    for pointer, i in adopted:
        by_scope[(pointer.scope_type, pointer.scope_ref, pointer.storage_config_id)].append(
            (pointer, i))
    written = set()
    for (scope, scope_ref, config_id), rows in by_scope.items():
        if write_delta(session, plane, tenant_id, scope, scope_ref, config_id, embedder.name,
                       codec.Rows(embedder.name, [p.id for p, _ in rows],
                                  [p.version for p, _ in rows], [texts[i] for _, i in rows],
                                  vectors[[i for _, i in rows]])):
            report.deltas += 1
            written.add((scope, scope_ref))
    return written
