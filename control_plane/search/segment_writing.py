"""Writing the index's segments (the indexer's steps 5-6): a delta per scope per round,
recorded only if its pointers are still live; compaction of a scope with ``compact_after``
deltas or more, its snapshot and deltas filtered against the live pointers becoming one new
snapshot; and rebuilds from the live pointers only (an erasure's). A crash leaves at worst a
segment no row names (orphan GC removes it) or a pointer whose vector is in no segment (the
next compaction reads its vector object)."""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer, SearchSegment
from ..embedders.service import embedder_for
from ..memories.api import delete_quietly
from ..plane.data_plane import DataPlane
from . import codec, index_rows, store
from .claims import compacting
from .index import SearchCache

if TYPE_CHECKING:
    from ..embedders import Running
    from ..settings import Settings

log = logging.getLogger(__name__)

COMPACT_AFTER = 6  # deltas; a cold search reads at most 1 snapshot + COMPACT_AFTER deltas


def delete_paths(session: Session, plane: DataPlane,
                 paths: Iterable[tuple[uuid.UUID, str]]) -> None:
    by_config: dict[uuid.UUID, list[str]] = defaultdict(list)
    for config_id, path in paths:
        by_config[config_id].append(path)
    for config_id, found in by_config.items():
        delete_quietly(plane.by_id(session, config_id), found)
    session.commit()


def write_delta(session: Session, plane: DataPlane, tenant_id: uuid.UUID, scope: str,
                scope_ref: str, config_id: uuid.UUID, model: str, rows: codec.Rows) -> bool:
    target = plane.by_id(session, config_id)
    segment_id = new_id()
    path = store.put_segment(session, plane, target, tenant_id, scope, scope_ref, segment_id,
                             rows)
    begin_write(session)
    live = index_rows.lock_live(session, rows.ids)
    if live != set(zip(rows.ids, rows.versions, strict=True)):
        # A pointer changed or went since it was embedded (an erasure may be under way):
        # this delta is not recorded; the next compaction reads the vectors still live.
        session.rollback()
        delete_quietly(target, [path])
        return False
    session.add(SearchSegment(id=segment_id, tenant_id=tenant_id, scope_type=scope,
                              scope_ref=scope_ref, kind="delta", embedding_model=model,
                              storage_config_id=target.config_id, storage_path=path,
                              rows=len(rows.ids), created_at=utcnow()))
    session.commit()
    return True


def compact_due(session: Session, plane: DataPlane, cache: SearchCache | None,
                tenant_id: uuid.UUID, scope: str, scope_ref: str, model: str,
                compact_after: int = COMPACT_AFTER) -> bool:
    """Compact the scope if it has ``compact_after`` deltas or more, keeping a cold search
    at 1 + ``compact_after`` reads at most. Size-tiered, so the cost stays about linear in
    the rows written: when the deltas hold a quarter of the snapshot's rows or more, all
    segments become one new snapshot; else the deltas but the largest merge into one. False,
    changing nothing, while another process compacts the scope (``claims.compacting``)."""
    if not _deltas_due(session, tenant_id, scope, scope_ref, compact_after):
        return False
    with compacting(session.get_bind().engine, tenant_id, scope, scope_ref) as mine:
        if not mine:
            return False  # another process compacts the scope now
        return _compact_due(session, plane, cache, tenant_id, scope, scope_ref, model,
                            compact_after)


def _by_config(session: Session, tenant_id: uuid.UUID, scope: str,
               scope_ref: str) -> dict[uuid.UUID, list[SearchSegment]]:
    by_config: dict[uuid.UUID, list[SearchSegment]] = defaultdict(list)
    for segment in index_rows.segments(session, tenant_id, scope, scope_ref):
        by_config[segment.storage_config_id].append(segment)
    session.commit()
    return by_config


def _deltas_due(session: Session, tenant_id: uuid.UUID, scope: str, scope_ref: str,
                compact_after: int) -> bool:
    return any(sum(s.kind == "delta" for s in found) >= compact_after
               for found in _by_config(session, tenant_id, scope, scope_ref).values())


def _compact_due(session: Session, plane: DataPlane, cache: SearchCache | None,
                 tenant_id: uuid.UUID, scope: str, scope_ref: str, model: str,
                 compact_after: int) -> bool:
    by_config = _by_config(session, tenant_id, scope, scope_ref)  # again, under the lock
    compacted = False
    for config_id, found in by_config.items():
        deltas = [s for s in found if s.kind == "delta"]
        if len(deltas) < compact_after:
            continue
        snapshot_rows = sum(s.rows for s in found if s.kind == "snapshot")
        if sum(s.rows for s in deltas) * 4 >= snapshot_rows:
            compacted |= compact_scope(session, plane, cache, tenant_id, scope, scope_ref,
                                       model, config_id=config_id)
            continue
        largest = max(deltas, key=lambda s: s.rows)
        compacted |= compact_scope(session, plane, cache, tenant_id, scope, scope_ref, model,
                                   only=[s for s in deltas if s.id != largest.id],
                                   config_id=config_id)
    return compacted


def compact_scope(session: Session, plane: DataPlane, cache: SearchCache | None,
                  tenant_id: uuid.UUID, scope: str, scope_ref: str, model: str,
                  only: Sequence[SearchSegment] | None = None,
                  config_id: uuid.UUID | None = None) -> bool:
    """Replace the scope's segments in one storage configuration by one snapshot of the
    live vectors of its memories there (none if it has none), written to that same bucket;
    without ``config_id``, each configuration the scope has segments or memories in.
    Live pointers missing from every segment are read from their vector objects. With
    ``only``, just those deltas merge into one delta of their live rows. False if another
    compaction of the scope won the race (nothing changed then)."""
    if config_id is None:
        configs = {s.storage_config_id for s in (only if only is not None else
                                                 index_rows.segments(session, tenant_id,
                                                                     scope, scope_ref))}
        configs |= {p.storage_config_id
                    for p in index_rows.live_in_scope(session, tenant_id, scope, scope_ref,
                                                      model)}
        session.commit()
        results = [compact_scope(session, plane, cache, tenant_id, scope, scope_ref, model,
                                 [s for s in only if s.storage_config_id == config]
                                 if only is not None else None, config)
                   for config in sorted(configs)]
        return all(results)
    existing = list(only) if only is not None else [
        s for s in index_rows.segments(session, tenant_id, scope, scope_ref)
        if s.storage_config_id == config_id]
    live = [p for p in index_rows.live_in_scope(session, tenant_id, scope, scope_ref, model)
            if p.storage_config_id == config_id]
    session.commit()
    latest: dict[uuid.UUID, tuple[int, np.ndarray, str]] = {}
    throwaway = SearchCache(max_rows=0, max_value_bytes=0)
    for row in existing:
        if row.embedding_model != model:
            continue
        try:
            segment = store.load_segment(session, plane, cache or throwaway, row)
        except store.IndexObjectUnreadable:
            log.warning("search segment %s is unreadable; its rows are rebuilt", row.id)
            continue
        for i, pid in enumerate(segment.ids):
            version = int(segment.versions[i])
            if pid not in latest or latest[pid][0] < version:
                latest[pid] = (version, segment.vectors[i], segment.texts[i])
    ids: list[uuid.UUID] = []
    versions: list[int] = []
    texts: list[str] = []
    vectors: list[np.ndarray] = []
    for pointer in live:
        have = latest.get(pointer.id)
        if only is not None and (have is None or have[0] != pointer.version):
            continue  # a merge of deltas keeps what they hold, nothing more
        if have is None or have[0] != pointer.version:
            try:
                rows = store.read_vector(session, plane,
                                         plane.by_id(session, pointer.storage_config_id),
                                         tenant_id, pointer.id, pointer.embedding_storage_path)
            except store.IndexObjectUnreadable:
                continue
            if rows.model != model or not rows.ids or rows.versions[0] != pointer.version:
                continue
            have = (pointer.version, rows.vectors[0], rows.texts[0])
        ids.append(pointer.id)
        versions.append(have[0])
        vectors.append(have[1])
        texts.append(have[2])
    new_row = None
    target = plane.by_id(session, config_id)
    session.commit()
    if ids:
        segment_id = new_id()
        about = {p.id: p.subject_user_id for p in live}  # a subject's rows: sealed apart
        path = store.put_segment(session, plane, target, tenant_id, scope, scope_ref, segment_id,
                                 codec.Rows(model, ids, versions, texts, np.vstack(vectors)
                                            .astype(np.float32), [about[i] for i in ids]))
        new_row = SearchSegment(id=segment_id, tenant_id=tenant_id, scope_type=scope,
                                scope_ref=scope_ref, embedding_model=model,
                                kind="snapshot" if only is None else "delta",
                                storage_config_id=target.config_id, storage_path=path,
                                rows=len(ids), created_at=utcnow())
    begin_write(session)
    if not index_rows.replace_segments(session, [s.id for s in existing], new_row):
        session.rollback()
        if new_row is not None:
            delete_quietly(target, [new_row.storage_path])
        return False
    session.commit()
    delete_paths(session, plane, [(s.storage_config_id, s.storage_path) for s in existing])
    if cache is not None:
        cache.segments.forget([s.id for s in existing])
    return True


def rebuild_scopes(session: Session, plane: DataPlane, runtime: Running | Settings,
                   tenant_id: uuid.UUID, scopes: Iterable[tuple[str, str]],
                   cache: SearchCache | None = None) -> int:
    """Rebuild the snapshots of these scopes from their live pointers only (an erasure calls
    it once the subject's pointers are marked for deletion: the new snapshots hold none of
    them, and the old segment objects are deleted). The scopes' segments of every embedder
    are replaced. Returns the number of scopes rebuilt."""
    done = 0
    for scope, scope_ref in sorted(set(scopes)):
        models = {s.embedding_model
                  for s in index_rows.segments(session, tenant_id, scope, scope_ref)}
        session.commit()
        if not models:
            continue
        current = embedder_for(session, runtime, tenant_id).name
        session.commit()
        for model in sorted(models, key=lambda m: m != current):
            for _ in range(3):
                if compact_scope(session, plane, cache, tenant_id, scope, scope_ref, model):
                    break
        done += 1
    return done


def forget_pointers(session: Session, plane: DataPlane, runtime: Running | Settings,
                    tenant_id: uuid.UUID, pointer_ids: Sequence[uuid.UUID]) -> int:
    """Rebuild the snapshots of every scope holding these pointers, which are no longer
    ``synced`` (an erasure marked them ``pending_delete``): no segment keeps their vectors or
    texts afterwards. Idempotent: an erasure resumed after a crash calls it again."""
    if not pointer_ids:
        return 0
    scopes = {(r.scope_type, r.scope_ref) for r in session.execute(
        select(MemoryPointer.scope_type, MemoryPointer.scope_ref)
        .where(MemoryPointer.tenant_id == tenant_id, MemoryPointer.id.in_(pointer_ids))
        .distinct())}
    session.commit()
    return rebuild_scopes(session, plane, runtime, tenant_id, scopes)
