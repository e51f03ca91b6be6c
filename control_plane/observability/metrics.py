"""The Prometheus metrics of one process: HTTP requests, storage calls, jobs, reconcile and
orphan GC, and gauges read from the database at each scrape.

Under ``memplane serve --workers N`` the parent names a directory in
``PROMETHEUS_MULTIPROC_DIR`` before it starts its processes: prometheus-client's
multiprocess mode then keeps each process's values in files there, and ``exposition`` (what
any worker's /metrics answers) sums the counters and histograms of every process of the
server — its workers and its background process."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("memplane_http_requests", "HTTP requests handled",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("memplane_http_request_duration_seconds",
                                 "Time to answer an HTTP request", ["method", "route"],
                                 registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1,
                                          2.5, 5, 10))
        # Calls to tenants' buckets and the default bucket (storage_adapters wrapped by
        # ``InstrumentedAdapter``): latency per backend and operation, failures by kind.
        self.storage_latency = Histogram(
            "memplane_storage_operation_duration_seconds",
            "Time one storage call took (a listing: until it was read to its end)",
            ["backend", "operation"], registry=self.registry,
            buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.storage_errors = Counter(
            "memplane_storage_errors", "Storage calls that failed, by problem "
            "(not_found, exists, integrity, unreachable, auth_failed, permission_denied, "
            "bucket_not_found, endpoint_not_allowed, other)",
            ["backend", "operation", "problem"], registry=self.registry)
        self.storage_refused = Counter(
            "memplane_storage_refused", "Calls to a tenant's own bucket refused unsent "
            "because that tenant's bulkhead was full (plane/bulkhead.py)",
            ["backend"], registry=self.registry)
        # Compliance jobs run by a worker in this process (jobs/worker.py).
        self.job_duration = Histogram(
            "memplane_job_duration_seconds", "Time one attempt at a job took, by outcome "
            "(completed, failed, retried, taken_over, abandoned)", ["kind", "outcome"],
            registry=self.registry,
            buckets=(.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600))
        # Reconciler and orphan GC runs in this process (integrity/reconcile.py); a
        # `memplane reconcile` CronJob prints its own counts, and the database gauges
        # (memplane_pointers_*, memplane_gc_candidates) show what is left to do.
        self.reconcile_actions = Counter(
            "memplane_reconcile_actions", "Pointers the reconciler settled, by action "
            "(write_completed, write_rolled_back, delete_completed)", ["action"],
            registry=self.registry)
        self.gc_objects = Counter(
            "memplane_gc_objects", "Objects the orphan GC handled, by outcome (marked, "
            "deleted, rescued)", ["outcome"], registry=self.registry)
        # How late the event loop's timer woke (observability/loop_lag.py).
        self.loop_lag = Histogram(
            "memplane_event_loop_lag_seconds", "How late the event loop woke from a timer "
            "of 0.25 s: time every request waited on the loop meanwhile",
            registry=self.registry,
            buckets=(.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self._database = _DatabaseGauges()
        self.registry.register(self._database)

    def exposition(self) -> bytes:
        """The text /metrics answers: this process's metrics, or under multiprocess mode
        those of every process sharing the directory, summed (the database gauges once)."""
        if not os.environ.get(MULTIPROC_ENV):
            return generate_latest(self.registry)
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(self._database)
        return generate_latest(registry)

    def watch_database(self, read: Callable[[], DatabaseState]) -> None:
        """Report queue depth, audit sealing lag, unsettled pointers and GC candidates from
        ``read`` at each scrape: the database's view, true whichever process runs the jobs,
        the sealer or the reconciler."""
        self._database.read = read


MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class DatabaseState:
    """What the database says at one scrape (see ``Runtime.database_state``)."""

    __slots__ = ("jobs", "unsealed_oldest_age", "unsealed_rows", "pointers",
                 "pending_oldest_age", "gc_candidates")

    def __init__(self, *, jobs: Iterable[tuple[str, str, int]], unsealed_oldest_age: float,
                 unsealed_rows: int, pointers: Iterable[tuple[str, int]],
                 pending_oldest_age: float, gc_candidates: int) -> None:
        self.jobs = list(jobs)
        self.unsealed_oldest_age = unsealed_oldest_age
        self.unsealed_rows = unsealed_rows
        self.pointers = dict(pointers)
        self.pending_oldest_age = pending_oldest_age
        self.gc_candidates = gc_candidates


UNSETTLED_STATES = ("pending_write", "pending_delete", "corrupt")


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(name, documentation)
    gauge.add_metric([], value)
    return gauge


class _DatabaseGauges(Collector):
    def __init__(self) -> None:
        self.read: Callable[[], DatabaseState] | None = None

    def describe(self) -> Iterable[Any]:
        return []  # read at scrape time only; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        if self.read is None:
            return
        up = "memplane_database_metrics_up"
        about_up = "Whether /metrics could read the gauges below from the database"
        try:
            now = self.read()
        except Exception as exc:  # a scrape must answer even when the database does not
            log.warning("could not read the database for /metrics: %s", type(exc).__name__)
            yield _gauge(up, about_up, 0)
            return
        yield _gauge(up, about_up, 1)
        jobs = GaugeMetricFamily("memplane_jobs", "Compliance jobs waiting or running, by "
                                 "kind and state (queued, running)", labels=["kind", "state"])
        for kind, job_state, count in now.jobs:
            jobs.add_metric([kind, job_state], count)
        yield jobs
        yield _gauge("memplane_audit_unsealed_oldest_age_seconds",
                     "Age of the oldest audit row the sealer has not chained yet (0 when "
                     "every row is sealed)", now.unsealed_oldest_age)
        yield _gauge("memplane_audit_unsealed_rows", "Audit rows the sealer has not chained yet",
                     now.unsealed_rows)
        pointers = GaugeMetricFamily(
            "memplane_pointers_unsettled", "Memory pointers a write or delete left pending "
            "(the reconciler settles them) or marked corrupt (never served)",
            labels=["sync_status"])
        for status in UNSETTLED_STATES:
            pointers.add_metric([status], now.pointers.get(status, 0))
        yield pointers
        yield _gauge("memplane_pointers_pending_oldest_age_seconds",
                     "Age of the oldest pending pointer (0 when none): far past "
                     "MEMPLANE_RECONCILE_GRACE_SECONDS means reconcile is not running",
                     now.pending_oldest_age)
        yield _gauge("memplane_gc_candidates", "Unnamed objects marked by orphan GC, waiting "
                     "for the sweep a grace period later", now.gc_candidates)
