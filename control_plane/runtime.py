"""Everything a running control plane holds: engine, sessions, data plane, background work.

Built by ``create_app`` (for the API) and by the CLI (for reconcile, verify, migrations), so
both run the same service code against the same configuration.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from .audit import checkpoints
from .audit import service as audit
from .audit.batcher import AuditBatcher
from .db.engine import make_engine, make_session_factory
from .identity import CALLERS, Caller
from .jobs import limits as job_limits
from .keys.subject_keys import SubjectKeyOpener
from .observability.metrics import DatabaseState
from .plane.bulkhead import Bulkheads
from .plane.credentials import CredentialBox, load_server_key
from .plane.data_plane import DataPlane
from .plane.keyring import Keyring
from .settings import Settings
from .tenants.service import require_role
from .testhooks import pause_from_env

if TYPE_CHECKING:
    from .background import BackgroundProcess
    from .deps import Services
    from .jobs.worker import Handler
    from .search.foreground import ForegroundActivity, ServerActivity, SharedClock
    from .search.service import Searching
    from .storage_config.router import Running as StorageRunning

log = logging.getLogger(__name__)


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine: Engine = make_engine(
            settings.resolved_database_url, pool_size=settings.db_pool_size,
            sqlite_synchronous=settings.sqlite_synchronous,
            pool_recycle=settings.db_pool_recycle_seconds, pre_ping=settings.db_pool_pre_ping,
        )
        self.sessions: sessionmaker[Session] = make_session_factory(self.engine)
        job_limits.configure(self.sessions, settings)  # each session knows the job quotas
        # Tenants' bucket credentials are sealed with the server key; the data plane opens
        # them only to build an adapter.
        self.plane = DataPlane(settings.resolved_bucket_url,
                               credentials=CredentialBox(load_server_key(settings)),
                               allowed_endpoints=settings.allowed_endpoints,
                               impersonation_allowed=settings.gcs_impersonation_allowed)
        self.plane.keys = Keyring(settings)
        self.plane.subject_keys = SubjectKeyOpener(self.plane.keys)
        if (pause := pause_from_env()) is not None:  # crash tests only; see testhooks.py
            self.plane.checkpoint = pause
        self.plane.max_object_bytes = settings.max_object_bytes
        self.plane.bulkheads = Bulkheads(settings.storage_calls_per_tenant,
                                         settings.storage_waiters_per_tenant,
                                         settings.storage_wait_seconds,
                                         threads=settings.storage_threads,
                                         reserved=settings.storage_threads_reserved)
        self.plane.call_deadline = settings.storage_call_deadline_seconds
        CALLERS.ttl = settings.auth_cache_seconds
        self.plane.audit_batcher = AuditBatcher(self.engine)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._background: BackgroundProcess | None = None
        self._activity: ForegroundActivity | None = None
        from .search.blas import limit_threads
        from .search.index import SearchCache

        limit_threads(settings.blas_threads)
        self.search_cache = SearchCache(settings.search_cache_rows,
                                        settings.search_cache_value_bytes)

    def database_state(self) -> DatabaseState:
        """Queue depth, audit sealing lag, unsettled pointers and GC candidates, for
        /metrics (each query is served by an index)."""
        from sqlalchemy import func, select

        from .db.base import utcnow
        from .db.models import AccessLog, GcCandidate, Job, MemoryPointer
        from .observability.metrics import UNSETTLED_STATES

        def age(oldest: datetime | None, now: datetime) -> float:
            if oldest is None:
                return 0.0
            if oldest.tzinfo is None:
                oldest = oldest.replace(tzinfo=UTC)
            return max(0.0, (now - oldest).total_seconds())

        pending = MemoryPointer.sync_status.in_(("pending_write", "pending_delete"))
        with self.sessions() as session:
            jobs = session.execute(
                select(Job.kind, Job.state, func.count()).where(
                    Job.state.in_(("queued", "running"))).group_by(Job.kind, Job.state)).all()
            unsealed_since, unsealed = session.execute(
                select(func.min(AccessLog.accessed_at), func.count())
                .where(AccessLog.seq.is_(None))).one()
            pointers = session.execute(
                select(MemoryPointer.sync_status, func.count())
                .where(MemoryPointer.sync_status.in_(UNSETTLED_STATES))
                .group_by(MemoryPointer.sync_status)).all()
            pending_since = session.scalar(select(func.min(MemoryPointer.updated_at))
                                           .where(pending))
            candidates = session.scalar(select(func.count()).select_from(GcCandidate)
                                        .where(GcCandidate.swept_at.is_(None))) or 0
        now = utcnow()
        return DatabaseState(
            jobs=((kind, state, int(n)) for kind, state, n in jobs),
            unsealed_oldest_age=age(unsealed_since, now), unsealed_rows=int(unsealed),
            pointers=((status, int(n)) for status, n in pointers),
            pending_oldest_age=age(pending_since, now), gc_candidates=int(candidates))

    def refuse(self, session: Session, caller: Caller, roles: tuple[str, ...],
               action: str) -> None:
        """A role refused by the request dependencies (control_plane.deps): recorded in the
        audit log, then Forbidden."""
        require_role(session, caller, roles, action)

    def migrate(self) -> None:
        from .db.migrate import upgrade  # Alembic: imported by the processes that migrate

        upgrade(self.engine)

    def start_background(self, *, separate_process: bool = False) -> None:
        """The server's background work: the audit sealer and, with MEMPLANE_RUN_JOBS, a
        job worker and the search indexer. With ``separate_process`` (``memplane serve``),
        MEMPLANE_BACKGROUND_PROCESS and an indexer to run, the sealer and the indexer run in a
        process of their own beside the server (control_plane.background)."""
        from . import background

        if separate_process and background.wanted(self.settings, self.engine):
            from .search.foreground import ForegroundActivity

            clock = background.shared_clock()
            self._activity = ForegroundActivity(self.engine, shared=clock)
            self._background = background.BackgroundProcess(self.settings, clock,
                                                            start_background_work)
            self.start_worker()
            self.start_helping_indexer(clock)
            return
        self.start_sealer()
        if self.settings.run_jobs:
            self.start_worker()
            # The indexer goes where the jobs go: an API replica that runs no jobs
            # (production, beside ``memplane worker`` processes) spends nothing on it.
            if self.settings.embed_on_write:
                self.start_indexer(yield_to_requests=True)

    def publish_activity(self) -> None:
        """A worker of ``memplane serve --workers N``: tell the host's background process
        (its indexer yields to requests) when this process's requests use the database,
        on the clock of the host's board (control_plane.host_board)."""
        from .host_board import ENV, HostClock
        from .search.foreground import ForegroundActivity

        where = os.environ.get(ENV)
        if where:
            clock = HostClock(Path(where))
            self._activity = ForegroundActivity(self.engine, shared=clock)
            if self.settings.run_background:
                self.start_helping_indexer(clock)

    def start_sealer(self) -> None:
        """The audit sealer: chains new audit rows every few hundred milliseconds, and
        anchors each tenant's chain head in its bucket every MEMPLANE_AUDIT_CHECKPOINT_SECONDS
        while rows arrive."""
        thread = threading.Thread(target=self._seal_loop, name="memplane-audit-sealer",
                                  daemon=True)
        thread.start()
        self._threads.append(thread)

    def start_indexer(self, *, yield_to_requests: bool = False,
                      activity: ServerActivity | None = None) -> None:
        """The search indexer: embeds what was written, after its commit (search.indexer).
        Beside the server's requests it yields to them (MEMPLANE_INDEX_YIELD_MS, within
        MEMPLANE_INDEX_MAX_LAG_SECONDS): to this process's own, or to those ``activity``
        tells of; in a worker process it runs flat out."""
        from .search.indexer import Indexer

        indexer = Indexer(self.sessions, self.plane, self, self.search_cache,
                          yield_ms=self.settings.index_yield_ms if yield_to_requests else 0.0,
                          max_lag=self.settings.index_max_lag_seconds, activity=activity)
        thread = threading.Thread(target=indexer.run_forever, args=(self._stop,),
                                  name="memplane-search-indexer", daemon=True)
        thread.start()
        self._threads.append(thread)

    def start_helping_indexer(self, clock: SharedClock) -> None:
        """Beside a background process's indexer (where jobs run and writes are embedded),
        this server process's helping indexer (MEMPLANE_INDEX_WHEN_IDLE): it indexes only
        while the requests that ``clock`` tells of have been quiet for
        MEMPLANE_INDEX_YIELD_MS, so a burst's backlog is indexed on this process's core too
        (search.indexer)."""
        from .search.indexer import Indexer, ServerActivity, can_help

        settings = self.settings
        if not (settings.run_jobs and settings.embed_on_write and settings.index_when_idle
                and settings.index_yield_ms > 0 and can_help(self.engine)):
            return
        indexer = Indexer(self.sessions, self.plane, self, self.search_cache,
                          yield_ms=self.settings.index_yield_ms,
                          activity=ServerActivity(clock), helping=True)
        thread = threading.Thread(target=indexer.run_forever, args=(self._stop,),
                                  name="memplane-search-helper", daemon=True)
        thread.start()
        self._threads.append(thread)

    def start_worker(self, handlers: dict[str, Handler] | None = None) -> None:
        """MEMPLANE_JOB_THREADS job worker threads (export, erase, …) for the embedded
        default; production runs ``memplane worker`` processes instead and sets
        MEMPLANE_RUN_JOBS=false. The first does the chores between jobs; ``handlers``
        (tests) replace the server's."""
        from .job_handlers import JobWorker

        for i in range(self.settings.job_threads):
            worker = JobWorker(self.sessions, self.plane, self.settings, handlers=handlers,
                               chores=i == 0)
            thread = threading.Thread(target=worker.run_forever, args=(self._stop,),
                                      name=f"memplane-job-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _seal_loop(self) -> None:
        from .db.statistics import FirstAnalyze

        first_analyze = FirstAnalyze()
        while not self._stop.wait(self.settings.audit_seal_interval_seconds):
            try:  # a new deployment's hot tables get their statistics once they hold rows
                first_analyze.check(self.engine)
            except Exception:
                log.exception("analyzing the hot tables failed; retrying")
            try:
                with self.sessions() as session:
                    audit.seal_all(session)
            except Exception:
                log.exception("audit sealing failed; retrying")
            try:  # separately: a bucket that cannot be reached never holds up sealing
                with self.sessions() as session:
                    checkpoints.anchor_due(session, self.plane, self.settings,
                                           seal=audit.seal)
            except Exception:
                log.exception("audit anchoring failed; retrying")

    def close(self) -> None:
        self._stop.set()
        if self._background is not None:
            self._background.close()
        if self._activity is not None:
            self._activity.close()
        for thread in self._threads:
            thread.join(timeout=10)
        self.search_cache.close()
        if self.plane.audit_batcher is not None:
            self.plane.audit_batcher.close()
        self.plane.close()
        self.engine.dispose()


def start_host_background_work(settings: Settings,
                               activity: SharedClock) -> Callable[[], None]:
    """The background process of ``memplane serve --workers N`` (control_plane.workers):
    every background loop of the host, once — the audit sealer, and with MEMPLANE_RUN_JOBS
    the job worker (jobs, the compactor's and retention's schedules) and the search indexer
    (yielding to the workers' requests as ``activity`` tells). Its metrics join the workers'
    (prometheus-client's multiprocess mode)."""
    from .observability.metrics import Metrics
    from .search.indexer import ServerActivity

    runtime = Runtime(settings)
    try:
        runtime.plane.metrics = Metrics()
        runtime.start_sealer()
        if settings.run_jobs:
            runtime.start_worker()
            if settings.embed_on_write:
                runtime.start_indexer(yield_to_requests=True, activity=ServerActivity(activity))
    except BaseException:
        runtime.close()
        raise
    return runtime.close


def start_background_work(settings: Settings, activity: SharedClock) -> Callable[[], None]:
    """The background process's work (control_plane.background): a runtime of its own that
    runs the audit sealer and the search indexer, the indexer yielding to the server's
    requests as ``activity`` tells; returns what stops it."""
    from .search.indexer import ServerActivity

    runtime = Runtime(settings)
    try:
        runtime.start_sealer()
        runtime.start_indexer(yield_to_requests=True, activity=ServerActivity(activity))
    except BaseException:
        runtime.close()
        raise
    return runtime.close


if TYPE_CHECKING:
    def _as_the_routes_find_it(runtime: Runtime) -> tuple[Services, Searching, StorageRunning]:
        """The layers below the root take ``request.app.state.runtime`` for a protocol of
        their own (the request dependencies' ``Services``, search's ``Searching``, the storage
        routes' ``Running``); here the type checker holds the runtime to each of them."""
        return runtime, runtime, runtime
