"""After-commit embedding and the per-scope snapshots (the background side of search): the
loop that drives them, and its rounds.

A write never waits for its vector: it commits with the pointer's vector not ready
(``has_embeddings`` false, or ``embedding_storage_path`` naming an older content's vector).
The indexer, a thread of the Runtime (and of ``memplane worker``), takes such pointers in
batches:

  1. read each one's content and verify it against the pointer (I3) — a mismatch marks the
     pointer corrupt, as a read would (``content_reads``);
  2. embed the batch's texts in one call (``embedder_for`` the tenant; ``embedding``);
  3. put each vector, sealed like the content, beside it (``<content path>.vec``);
  4. one transaction: record each vector on its pointer *only if the pointer is still at the
     version embedded*; commit; delete superseded vectors (and the new ones not adopted);
  5. per scope, one delta segment holding the adopted rows (vector + text), recorded only if
     its pointers are still live (share-locked while the row is inserted; ``segment_writing``);
  6. a scope with ``compact_after`` deltas or more is compacted: its snapshot and deltas,
     filtered against the live pointers, become one new snapshot; the old objects go.

A crash anywhere leaves at worst a vector or segment no row names (orphan GC removes it)
or a pointer whose vector is in no segment (the next compaction reads its vector object).

Where it runs follows the jobs: a thread of ``memplane worker`` processes, and of the server
only when the server runs jobs itself (the embedded default); API replicas with
``MEMPLANE_RUN_JOBS=false`` spend nothing on it. Several indexers split the work: each claims
its batch with locks held until the batch is recorded, skips what another holds, and
re-checks what it got (``claims``: advisory locks on PostgreSQL, byte-range locks on a file
beside a SQLite database). Inside the server the indexer yields to requests
(``foreground.ForegroundActivity``): it waits while a request committed in the last
``MEMPLANE_INDEX_YIELD_MS``, unless its work has waited ``MEMPLANE_INDEX_MAX_LAG_SECONDS``,
and then catches up in larger batches.

Where the indexer runs in a background process beside the server (control_plane.background),
each server process also runs a *helping* indexer (``MEMPLANE_INDEX_WHEN_IDLE``): it works
only while the server's requests have been quiet for ``MEMPLANE_INDEX_YIELD_MS``, never
catches up during them, and leaves compaction to the background indexer. After a burst of
writes the backlog is then indexed on two cores, not one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.orm import Session, sessionmaker

from storage_adapters import base as storage

from ..db.base import utcnow
from ..db.engine import sqlite_writers
from ..db.models import MemoryPointer
from ..embedders import EmbedderFailed
from ..embedders.service import embedder_for
from ..errors import DomainError
from ..plane.data_plane import DataPlane
from ..plane.kek_providers import WrongKey
from ..plane.shared_pool import SharedPool
from . import index_rows
from .claims import Claims, FileClaims
from .embedding import RoundReport, embed_batch
from .foreground import ForegroundActivity, ServerActivity
from .index import SearchCache
from .segment_writing import COMPACT_AFTER, compact_due

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from ..embedders import Running
    from ..settings import Settings

    class Runtime(Running, Protocol):
        """What the indexer uses of the running server (``control_plane.runtime.Runtime``
        is one): its settings and data plane (each tenant's embedder) and its engine."""

        @property
        def engine(self) -> Engine: ...

log = logging.getLogger(__name__)

BATCH = 64
CATCH_UP_BATCH = 256  # a lagging indexer's rounds: fewer commits and deltas per memory
_LOOKBACK = timedelta(seconds=60)
_FULL_SCAN_EVERY = timedelta(seconds=30)


def index_round(session: Session, plane: DataPlane, runtime: Runtime | Settings,
                cache: SearchCache | None = None, *, since: datetime | None = None,
                batch: int = BATCH, compact_after: int = COMPACT_AFTER,
                skip: set[uuid.UUID] | None = None, claims: Claims | FileClaims | None = None,
                compact: bool = True, newest_first: bool = False) -> RoundReport:
    """One batch of pointers waiting for vectors (all tenants), then any compaction due
    (unless not ``compact``). A tenant whose bucket or keys fail is added to ``skip`` and left
    out of later rounds that share it, so one tenant's broken storage never holds up the
    others' indexing. With ``claims``, only pointers no other indexer holds, held until the
    round ends; ``newest_first`` (a helping indexer's) takes them from the backlog's newest
    end, away from the oldest that other indexers hold."""
    skip = skip if skip is not None else set()
    pool = cache.pool() if cache is not None else None
    if claims is None:
        pointers = index_rows.snapshots(
            session, index_rows.needing_vectors(session, since, batch, sorted(skip)))
        session.commit()
        return _index(session, plane, runtime, cache, pool, pointers,
                      compact_after if compact else None, skip)
    try:
        pointers = claims.take(session, index_rows.needing_vector_ids(
            session, since, batch * 4, sorted(skip), newest_first=newest_first), batch)
        return _index(session, plane, runtime, cache, pool, pointers,
                      compact_after if compact else None, skip)
    finally:
        claims.release()


def _index(session: Session, plane: DataPlane, runtime: Runtime | Settings,
           cache: SearchCache | None, pool: SharedPool | None,
           pointers: Sequence[MemoryPointer], compact_after: int | None,
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
        except (DomainError, storage.StorageError, WrongKey) as exc:
            # (WrongKey: a subject key of the tenant's that its KEK refuses, damaged in the
            # database or restored from elsewhere; the tenant's reads refuse it too)
            session.rollback()
            log.warning("indexing a tenant's memories failed (%s); retrying later",
                        type(exc).__name__)
            skip.add(tenant_id)
            report.failed_tenants += 1
            continue
        model = embedder_for(session, runtime, tenant_id).name
        session.commit()
        if compact_after is None:
            continue
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


def claims_for(engine: Engine) -> Claims | FileClaims | None:
    """How indexers on ``engine``'s database split the work: advisory locks on PostgreSQL,
    a file's byte-range locks beside a SQLite file whose writers take turns across processes
    (``db.engine.SqliteWriters``); None where one indexer is all there can be."""
    if engine.dialect.name == "postgresql":
        return Claims(engine)
    writers = sqlite_writers(engine)
    if writers is None or writers.shared is None or not FileClaims.available():
        return None
    return FileClaims(writers.shared.with_suffix(".index-claims"))


def can_help(engine: Engine) -> bool:
    """Whether indexers on ``engine``'s database can split the work (``claims_for``)."""
    claims = claims_for(engine)
    if claims is not None:
        claims.close()
    return claims is not None


class Indexer:
    """The background loop: a round whenever there is work, else a short wait.

    With ``yield_ms`` (inside the server), it waits while requests used the database in the
    last ``yield_ms`` milliseconds, but never lets its work wait more than ``max_lag``
    seconds: past that, it runs rounds of ``CATCH_UP_BATCH`` until one takes all that
    waits. A round short of a full batch is followed by a wait of ``interval``, so that
    trickling writes are indexed in batches, not one by one. Rounds take up to ``BATCH``
    memories where they run between a server's requests, and ``CATCH_UP_BATCH`` in a
    process of their own (``memplane worker``): fewer deltas, commits and flushes per
    memory where no request waits for the round to end.

    A ``helping`` indexer (a server process's, beside the background process's indexer)
    runs only while requests are quiet: it never catches up, takes rounds of ``BATCH`` from
    the backlog's newest end, and compacts nothing. It needs claims (PostgreSQL, or a
    SQLite file): ``can_help``."""

    def __init__(self, sessions: sessionmaker[Session], plane: DataPlane,
                 runtime: Runtime, cache: SearchCache, *, interval: float = 0.2,
                 clock: Callable[[], datetime] = utcnow, yield_ms: float = 0.0,
                 max_lag: float = 5.0, monotonic: Callable[[], float] = time.monotonic,
                 claims: bool = True, activity: ServerActivity | None = None,
                 helping: bool = False) -> None:
        self.sessions, self.plane, self.runtime, self.cache = sessions, plane, runtime, cache
        self.interval = interval
        self.clock = clock
        self.monotonic = monotonic
        self.yield_s = yield_ms / 1000
        self.max_lag = math.inf if helping else max_lag
        self.helping = helping
        self._last_full: datetime | None = None
        self._failing: set[uuid.UUID] = set()  # tenants whose storage failed this pass
        engine = runtime.engine
        self.claims = claims_for(engine) if claims or helping else None
        if helping and self.claims is None:
            raise ValueError("a helping indexer needs claims: PostgreSQL or a SQLite file")
        self.activity: ForegroundActivity | ServerActivity | None = None
        if self.yield_s > 0:
            self.activity = activity or ForegroundActivity(engine, monotonic)
        self.batch = BATCH if self.activity is not None or helping else CATCH_UP_BATCH
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
                                 skip=self._failing, claims=self.claims, batch=batch,
                                 compact=not self.helping, newest_first=self.helping)
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
