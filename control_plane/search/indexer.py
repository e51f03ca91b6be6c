"""After-commit embedding and the per-scope snapshots (the background side of search).

A write never waits for its vector: it commits with the pointer's vector not ready
(``has_embeddings`` false, or ``embedding_storage_path`` naming an older content's vector).
The indexer, a thread of the Runtime (and of ``memplane worker``), takes such pointers in
batches:

  1. read each one's content and verify it against the pointer (I3) — a mismatch marks the
     pointer corrupt, as a read would;
  2. embed the batch's texts in one call (``embedder_for`` the tenant);
  3. put each vector, sealed like the content, beside it (``<content path>.vec``);
  4. one transaction: record each vector on its pointer *only if the pointer is still at the
     version embedded*; commit; delete superseded vectors (and the new ones not adopted);
  5. per scope, one delta segment holding the adopted rows (vector + text), recorded only if
     its pointers are still live (share-locked while the row is inserted);
  6. a scope with ``compact_after`` deltas or more is compacted: its snapshot and deltas,
     filtered against the live pointers, become one new snapshot; the old objects go.

A crash anywhere leaves at worst a vector or segment no row names (orphan GC removes it)
or a pointer whose vector is in no segment (the next compaction reads its vector object).

Where it runs follows the jobs: a thread of ``memplane worker`` processes, and of the server
only when the server runs jobs itself (the embedded default); API replicas with
``MEMPLANE_RUN_JOBS=false`` spend nothing on it. Several indexers on PostgreSQL split the
work: each claims its batch with advisory locks held by a transaction of its own until the
batch is recorded, skips what another holds, and re-checks what it got (``Claims``).
Inside the server the indexer yields to requests (``ForegroundActivity``): it waits while
a request committed in the last ``MEMPLANE_INDEX_YIELD_MS``, unless its work has waited
``MEMPLANE_INDEX_MAX_LAG_SECONDS``, and then catches up in larger batches.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
from sqlalchemy import Connection, Engine, event, select
from sqlalchemy import text as sql
from sqlalchemy.orm import Session, sessionmaker

from storage_adapters import base as storage
from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from ..audit import service as audit
from ..audit.service import Actor
from ..db.base import new_id, utcnow
from ..db.engine import begin_write
from ..db.models import MemoryPointer, SearchSegment, SubjectKey
from ..embedders import EmbedderFailed, embedder_for
from ..errors import DomainError
from ..keys import subject_keys as keys
from ..kit import sha256_hex
from ..memories import repository as memories_repo
from ..memories.batch_sets import all_near
from ..memories.shared import delete_quietly, keyring_of
from ..plane.data_plane import DataPlane, Target
from ..plane.shared_pool import SharedPool
from . import codec, store
from . import repository as repo
from .index import SearchCache
from .text import searchable_text

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

BATCH = 64
CATCH_UP_BATCH = 256  # a lagging indexer's rounds: fewer commits and deltas per memory
COMPACT_AFTER = 6  # deltas; a cold search reads at most 1 snapshot + COMPACT_AFTER deltas
_LOOKBACK = timedelta(seconds=60)
_FULL_SCAN_EVERY = timedelta(seconds=30)


@dataclass
class RoundReport:
    embedded: int = 0
    skipped: int = 0
    corrupt: int = 0
    deltas: int = 0
    compacted: int = 0
    failed_tenants: int = 0


def _system(tenant_id: uuid.UUID) -> Actor:
    return Actor(tenant_id=tenant_id, accessor_type="system", accessor_id="search-indexer")


_MISSING = object()  # a content object the bucket does not have


def _fetch(target: Target, pointer: MemoryPointer) -> bytes | object:
    """The stored bytes of the pointer's content, as they are (no session: runs on the I/O
    pool); ``_MISSING`` if the bucket has no such object."""
    try:
        with store.storage_errors(pointer.id):
            return target.adapter.get(pointer.storage_path,
                                      envelope.sealed_size(pointer.content_size))
    except storage.ObjectNotFound:
        return _MISSING


def _live_keys(session: Session, tenant_id: uuid.UUID, blobs: Iterable[bytes | object]
               ) -> dict[uuid.UUID, tuple[uuid.UUID, bytes, uuid.UUID]]:
    """The subject keys the blobs' envelopes name, read in one query (id -> (id, wrapped
    key, KEK version), as ``keys.open_object`` takes them): no lookup per object."""
    wanted = set()
    for blob in blobs:
        if isinstance(blob, bytes) and envelope.is_envelope(blob):
            try:
                wanted.add(envelope.read_header(blob).key_id)
            except DecryptionError:
                continue  # opening it reports the damage
    if not wanted:
        return {}
    rows = session.execute(select(SubjectKey.id, SubjectKey.wrapped_key,
                                  SubjectKey.kek_version_id)
                           .where(SubjectKey.tenant_id == tenant_id,
                                  SubjectKey.id.in_(sorted(wanted)))).all()
    session.commit()
    return {r.id: (r.id, bytes(r.wrapped_key), r.kek_version_id) for r in rows
            if r.wrapped_key is not None}  # a destroyed key: open_object says so


def _verified_text(session: Session, plane: DataPlane, pointer: MemoryPointer,
                   blob: bytes | object,
                   live: dict[uuid.UUID, tuple[uuid.UUID, bytes, uuid.UUID]]) -> str | None:
    """The pointer's searchable text from its content, opened and checked against the
    pointer's hash (I3); None if it does not verify (the pointer is then marked corrupt and
    the failure audited, as a read does)."""
    problem = None
    actual = None
    data = b""
    if isinstance(blob, bytes):
        key_id = None
        if envelope.is_envelope(blob):
            try:
                key_id = envelope.read_header(blob).key_id
            except DecryptionError:
                key_id = None
        try:
            data = keys.open_object(session, keyring_of(plane), pointer.tenant_id,
                                    pointer.storage_path, pointer.id, blob,
                                    live.get(key_id) if key_id is not None else None)
            actual = sha256_hex(data)
        except DecryptionError as exc:
            data, problem = b"", str(exc)
        if session.in_transaction():  # a key looked up, or unwrapped with its KEK row
            session.commit()
    if actual == pointer.content_sha256:
        return searchable_text(json.loads(data), pointer.title)
    begin_write(session)
    if not memories_repo.mark_corrupt(session, pointer.id, pointer.storage_path, utcnow()):
        session.rollback()  # rewritten meanwhile: the next round takes the new content
        return None
    what = ("could not be decrypted" if problem is not None
            else "is missing from the bucket" if actual is None else "does not match its hash")
    audit.record(session, _system(pointer.tenant_id), "read", success=False,
                 pointer_id=pointer.id,
                 detail=f"hash_mismatch (search indexer): object {what}; expected "
                        f"{pointer.content_sha256} actual {actual}")
    session.commit()
    return None


def _io(pool: SharedPool | None, plane: DataPlane, tenant_id: uuid.UUID,
        fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn(item)`` for each item, side by side on the pool if there is one. ``fn`` uses no
    session (sessions are not shared between threads): object I/O and sealing only."""
    if pool is None or len(items) < 2:
        return [fn(item) for item in items]
    return pool.map(tenant_id, plane.bulkheads, fn, items)


def embed_batch(session: Session, plane: DataPlane, runtime: Runtime | Settings,
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
                lambda p: _fetch(targets[p.storage_config_id], p), pointers)
    live = _live_keys(session, tenant_id, blobs)
    for pointer, blob in zip(pointers, blobs, strict=True):
        text = _verified_text(session, plane, pointer, blob, live)
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
    paths = [repo.vector_path(p.storage_path) for p in todo]
    put = [(pointer, path, i) for i, (pointer, path) in enumerate(zip(todo, paths,
                                                                     strict=True))]
    begin_write(session)
    marked = repo.mark_vectors(session, [(p.id, p.version, p.storage_path) for p, _, _ in put],
                               embedder.name)
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
    _delete_paths(session, plane, superseded + unadopted)
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
        if _write_delta(session, plane, tenant_id, scope, scope_ref, config_id, embedder.name,
                        codec.Rows(embedder.name, [p.id for p, _ in rows],
                                   [p.version for p, _ in rows], [texts[i] for _, i in rows],
                                   vectors[[i for _, i in rows]])):
            report.deltas += 1
            written.add((scope, scope_ref))
    return written


def _delete_paths(session: Session, plane: DataPlane,
                  paths: Iterable[tuple[uuid.UUID, str]]) -> None:
    by_config: dict[uuid.UUID, list[str]] = defaultdict(list)
    for config_id, path in paths:
        by_config[config_id].append(path)
    for config_id, found in by_config.items():
        delete_quietly(plane.by_id(session, config_id), found)
    session.commit()


def _write_delta(session: Session, plane: DataPlane, tenant_id: uuid.UUID, scope: str,
                 scope_ref: str, config_id: uuid.UUID, model: str, rows: codec.Rows) -> bool:
    target = plane.by_id(session, config_id)
    segment_id = new_id()
    path = store.put_segment(session, plane, target, tenant_id, scope, scope_ref, segment_id,
                             rows)
    begin_write(session)
    live = repo.lock_live(session, rows.ids)
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
    segments become one new snapshot; else the deltas but the largest merge into one."""
    by_config: dict[uuid.UUID, list[SearchSegment]] = defaultdict(list)
    for segment in repo.segments(session, tenant_id, scope, scope_ref):
        by_config[segment.storage_config_id].append(segment)
    session.commit()
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
                                                 repo.segments(session, tenant_id, scope,
                                                               scope_ref))}
        configs |= {p.storage_config_id
                    for p in repo.live_in_scope(session, tenant_id, scope, scope_ref, model)}
        session.commit()
        results = [compact_scope(session, plane, cache, tenant_id, scope, scope_ref, model,
                                 [s for s in only if s.storage_config_id == config]
                                 if only is not None else None, config)
                   for config in sorted(configs)]
        return all(results)
    existing = list(only) if only is not None else [
        s for s in repo.segments(session, tenant_id, scope, scope_ref)
        if s.storage_config_id == config_id]
    live = [p for p in repo.live_in_scope(session, tenant_id, scope, scope_ref, model)
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
    if not repo.replace_segments(session, [s.id for s in existing], new_row):
        session.rollback()
        if new_row is not None:
            delete_quietly(target, [new_row.storage_path])
        return False
    session.commit()
    _delete_paths(session, plane, [(s.storage_config_id, s.storage_path) for s in existing])
    if cache is not None:
        cache.segments.forget([s.id for s in existing])
    return True


def rebuild_scopes(session: Session, plane: DataPlane, runtime: Runtime | Settings,
                   tenant_id: uuid.UUID, scopes: Iterable[tuple[str, str]],
                   cache: SearchCache | None = None) -> int:
    """Rebuild the snapshots of these scopes from their live pointers only (an erasure calls
    it once the subject's pointers are marked for deletion: the new snapshots hold none of
    them, and the old segment objects are deleted). The scopes' segments of every embedder
    are replaced. Returns the number of scopes rebuilt."""
    done = 0
    for scope, scope_ref in sorted(set(scopes)):
        models = {s.embedding_model for s in repo.segments(session, tenant_id, scope, scope_ref)}
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


def index_round(session: Session, plane: DataPlane, runtime: Runtime | Settings,
                cache: SearchCache | None = None, *, since: datetime | None = None,
                batch: int = BATCH, compact_after: int = COMPACT_AFTER,
                skip: set[uuid.UUID] | None = None, claims: Claims | None = None) -> RoundReport:
    """One batch of pointers waiting for vectors (all tenants), then any compaction due.
    A tenant whose bucket or keys fail is added to ``skip`` and left out of later rounds that
    share it, so one tenant's broken storage never holds up the others' indexing. With
    ``claims`` (PostgreSQL), only pointers no other indexer holds, held until the round ends."""
    skip = skip if skip is not None else set()
    pool = cache.pool() if cache is not None else None
    if claims is None:
        pointers = list(repo.needing_vectors(session, since, batch, sorted(skip)))
        session.commit()
        return _index(session, plane, runtime, cache, pool, pointers, compact_after, skip)
    try:
        pointers = claims.take(session, list(repo.needing_vectors(
            session, since, batch * 4, sorted(skip))), batch)
        return _index(session, plane, runtime, cache, pool, pointers, compact_after, skip)
    finally:
        claims.release()


def _index(session: Session, plane: DataPlane, runtime: Runtime | Settings,
           cache: SearchCache | None, pool: SharedPool | None,
           pointers: Sequence[MemoryPointer], compact_after: int,
           skip: set[uuid.UUID]) -> RoundReport:
    report = RoundReport()
    by_tenant: dict[uuid.UUID, list[MemoryPointer]] = defaultdict(list)
    for pointer in pointers:
        by_tenant[pointer.tenant_id].append(pointer)
    for tenant_id, found in by_tenant.items():
        try:
            scopes = embed_batch(session, plane, runtime, found, report, pool=pool)
        except EmbedderFailed as exc:
            session.rollback()
            log.warning("embedding failed for a tenant (%s); retrying later", exc.code)
            skip.add(tenant_id)
            report.failed_tenants += 1
            continue
        except (DomainError, storage.StorageError) as exc:
            session.rollback()
            log.warning("indexing a tenant's memories failed (%s); retrying later",
                        type(exc).__name__)
            skip.add(tenant_id)
            report.failed_tenants += 1
            continue
        model = embedder_for(session, runtime, tenant_id).name
        session.commit()
        for scope, scope_ref in scopes:
            if compact_due(session, plane, cache, tenant_id, scope, scope_ref, model,
                           compact_after):
                report.compacted += 1
    return report


def drain(session: Session, plane: DataPlane, runtime: Runtime | Settings,
          cache: SearchCache | None = None, *, batch: int = BATCH,
          compact_after: int = COMPACT_AFTER) -> RoundReport:
    """Index until nothing waits (tests, the CLI, the bench)."""
    total = RoundReport()
    skip: set[uuid.UUID] = set()
    while True:
        report = index_round(session, plane, runtime, cache, batch=batch,
                             compact_after=compact_after, skip=skip)
        for name in ("embedded", "skipped", "corrupt", "deltas", "compacted",
                     "failed_tenants"):
            setattr(total, name, getattr(total, name) + getattr(report, name))
        if report.embedded + report.skipped + report.corrupt + report.failed_tenants == 0:
            return total


_CLAIM_CLASS = 0x4D505658  # "MPVX": the first key of the indexer's advisory locks


# One statement for a batch's claims: the scan stops once ``n`` locks are held (no ORDER BY
# above the filter), so no candidate past them is locked; the candidates come in order.
_TAKE = sql("SELECT c.id FROM unnest(CAST(:ids AS uuid[]), CAST(:keys AS integer[])) AS c(id, k) "
            "WHERE pg_try_advisory_xact_lock(CAST(:c AS integer), c.k) LIMIT :n")


def _lock_key(pointer_id: uuid.UUID) -> int:
    return int.from_bytes(pointer_id.bytes[-4:], "big", signed=True)  # the random bits


class Claims:
    """The pointers an indexer works on, on PostgreSQL: transaction-scoped advisory locks
    (``pg_try_advisory_xact_lock``) taken on a connection of their own, held until the
    batch is recorded, so another indexer skips them. Advisory locks never block
    a write to the pointer rows; a crashed indexer's connection ends and its locks go."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._connection: Connection | None = None

    def take(self, session: Session, candidates: Sequence[MemoryPointer],
             limit: int) -> list[MemoryPointer]:
        """Up to ``limit`` of ``candidates`` locked for this indexer and still waiting for
        their vector (another indexer may have recorded it between the candidates' read and
        the lock)."""
        session.commit()
        if not candidates:
            return []
        if self._connection is None:
            self._connection = self.engine.connect()
        connection = self._connection
        held = list(connection.execute(_TAKE, {
            "ids": [p.id for p in candidates], "keys": [_lock_key(p.id) for p in candidates],
            "c": _CLAIM_CLASS, "n": limit}).scalars())
        if not held:
            return []
        P = MemoryPointer
        fresh = session.scalars(
            select(P).where(P.id.in_(held), repo.wants_vector())
            .order_by(P.updated_at)).all()
        session.commit()
        return list(fresh)

    def release(self) -> None:
        """End the claim's transaction (its advisory locks go) and return its connection."""
        if self._connection is not None:
            try:
                self._connection.close()  # back to the pool, rolled back
            finally:
                self._connection = None

    close = release


_BACKGROUND_THREADS = ("memplane-", "job-lease-")


class ForegroundActivity:
    """When this process last used the database outside its background threads (the
    server's request threads; not the sealer, job worker, indexer or search I/O threads,
    which are all named ``memplane-...``): listeners on the engine's connection checkouts
    and commits, one clock read each. Checkouts catch the PostgreSQL hot path too, whose
    single statements run on raw connections (``db.direct``) that fire no commit event."""

    def __init__(self, engine: Engine,
                 clock: Callable[[], float] = time.monotonic, *,
                 shared: SharedClock | None = None) -> None:
        self.engine = engine
        self.clock = clock
        self.last = -math.inf
        self.shared = shared  # also told to the indexer of a background process
        self.ignored: set[int] = set()  # thread idents whose commits do not count
        event.listen(engine, "checkout", self._used)
        event.listen(engine, "commit", self._used)

    def ignore_this_thread(self) -> None:
        self.ignored.add(threading.get_ident())

    def _used(self, *_: object) -> None:
        thread = threading.current_thread()
        if thread.ident in self.ignored or thread.name.startswith(_BACKGROUND_THREADS):
            return
        self.last = self.clock()
        if self.shared is not None:
            self.shared.value = self.last

    def quiet_for(self) -> float:
        """Seconds since the foreground last used the database (infinite if never)."""
        return self.clock() - self.last

    def close(self) -> None:
        for name in ("checkout", "commit"):
            if event.contains(self.engine, name, self._used):
                event.remove(self.engine, name, self._used)


class SharedClock(Protocol):
    """A ``time.monotonic`` reading shared between processes (a ``multiprocessing``
    ``RawValue`` of a double): the system-wide monotonic clock, so comparable in both."""

    value: float


class ServerActivity:
    """``ForegroundActivity`` of the server this process runs beside (control_plane.
    background): when its requests last used the database, read from the clock it shares."""

    def __init__(self, shared: SharedClock,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.shared = shared
        self.clock = clock

    def ignore_this_thread(self) -> None:
        pass  # this process's own threads never publish

    def quiet_for(self) -> float:
        return self.clock() - self.shared.value

    def close(self) -> None:
        pass


class Indexer:
    """The background loop: a round whenever there is work, else a short wait.

    With ``yield_ms`` (inside the server), it waits while requests used the database in the
    last ``yield_ms`` milliseconds, but never lets its work wait more than ``max_lag``
    seconds: past that, it runs rounds of ``CATCH_UP_BATCH`` until one takes all that
    waits. A round short of a full batch is followed by a wait of ``interval``, so that
    trickling writes are indexed in batches, not one by one. Rounds take up to ``BATCH``
    memories where they run between a server's requests, and ``CATCH_UP_BATCH`` in a
    process of their own (``memplane worker``): fewer deltas, commits and flushes per
    memory where no request waits for the round to end."""

    def __init__(self, sessions: sessionmaker[Session], plane: DataPlane,
                 runtime: Runtime, cache: SearchCache, *, interval: float = 0.2,
                 clock: Callable[[], datetime] = utcnow, yield_ms: float = 0.0,
                 max_lag: float = 5.0, monotonic: Callable[[], float] = time.monotonic,
                 claims: bool = True, activity: ServerActivity | None = None) -> None:
        self.sessions, self.plane, self.runtime, self.cache = sessions, plane, runtime, cache
        self.interval = interval
        self.clock = clock
        self.monotonic = monotonic
        self.yield_s = yield_ms / 1000
        self.max_lag = max_lag
        self._last_full: datetime | None = None
        self._failing: set[uuid.UUID] = set()  # tenants whose storage failed this pass
        engine = runtime.engine
        self.claims = (Claims(engine) if claims and engine.dialect.name == "postgresql"
                       else None)
        self.activity: ForegroundActivity | ServerActivity | None = None
        if self.yield_s > 0:
            self.activity = activity or ForegroundActivity(engine, monotonic)
        self.batch = BATCH if self.activity is not None else CATCH_UP_BATCH
        self._caught_up = monotonic()  # when a round last found nothing waiting
        self.catching_up = False
        self.full = False  # the last round took a full batch: more may wait

    def run_forever(self, stop: threading.Event) -> None:
        if self.activity is not None:
            self.activity.ignore_this_thread()
        try:
            while not stop.is_set():
                wait = self.should_wait()
                if wait > 0:
                    stop.wait(wait)
                    continue
                self.full = False
                try:
                    self.run_once()
                except Exception:
                    log.exception("search indexing failed; retrying")
                if not self.full:
                    # A round short of a full batch took all that waited: let the next
                    # writes gather for ``interval`` rather than index them one by one
                    # (each round costs a query, a delta segment and, every few, a
                    # compaction whatever its size).
                    stop.wait(self.interval)
        finally:
            self.close()

    def should_wait(self) -> float:
        """Seconds to wait before the next round so as not to compete with requests (0: run
        now); sets ``catching_up`` when the lag bound forces a round."""
        if self.activity is None or self.catching_up:
            return 0.0
        quiet = self.activity.quiet_for()
        if quiet >= self.yield_s:
            return 0.0
        lagging = self.monotonic() - self._caught_up
        if lagging >= self.max_lag:
            self.catching_up = True
            return 0.0
        return min(self.yield_s - quiet, self.max_lag - lagging)

    def run_once(self) -> bool:
        now = self.clock()
        since = None
        if self._last_full is not None and now - self._last_full < _FULL_SCAN_EVERY:
            since = now - _LOOKBACK
        else:
            self._last_full = now
            self._failing.clear()  # each full pass tries every tenant again
        batch = CATCH_UP_BATCH if self.catching_up else self.batch
        with self.sessions() as session:
            report = index_round(session, self.plane, self.runtime, self.cache, since=since,
                                 skip=self._failing, claims=self.claims, batch=batch)
        taken = report.embedded + report.skipped + report.corrupt
        self.full = taken >= batch
        busy = taken + report.failed_tenants > 0
        if not self.full:  # it took all that waited
            self._caught_up = self.monotonic()
            self.catching_up = False
        return busy

    def close(self) -> None:
        if self.claims is not None:
            self.claims.close()
        if self.activity is not None:
            self.activity.close()


def forget_pointers(session: Session, plane: DataPlane, runtime: Runtime | Settings,
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
