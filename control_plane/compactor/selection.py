"""What the compactor compacts: the tenant's thresholds, and the chunks of the due buckets,
read with their bodies.

A bucket is a (scope, scope ref) with at least ``min_events`` uncompressed events that
occurred more than ``older_than_days`` ago (per tenant, ``PUT /v1/compactor/config``). Once
it qualifies, *all* its uncompressed events are compacted (the seed's step 1), the recent
ones too. Its events are read in (occurred_at, id) order, cut into chunks of one data subject each
(``erase.by_subject``) of about equal size, and each chunk's bodies are read hash-verified
from the bucket.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from ..db.models import MemoryEvent
from ..errors import DomainError, HashMismatch
from ..identity import Actor
from ..plane.data_plane import DataPlane
from . import repository as repo
from .erase import by_subject
from .repository import Bucket
from .schemas import DEFAULT_MIN_EVENTS, DEFAULT_OLDER_THAN_DAYS


@dataclass(frozen=True)
class Thresholds:
    min_events: int = DEFAULT_MIN_EVENTS
    older_than_days: int = DEFAULT_OLDER_THAN_DAYS
    enabled: bool = True


def thresholds(session: Session, tenant_id: uuid.UUID) -> Thresholds:
    row = repo.get_settings(session, tenant_id)
    if row is None:
        return Thresholds()
    return Thresholds(row.min_events, row.older_than_days, row.enabled)


def chunk_sizes(total: int, cap: int) -> list[int]:
    """Split ``total`` events into as few entries as the per-entry cap allows, of about
    equal size (each at least half the cap, so never under ``min_events``)."""
    parts = max(1, -(-total // cap))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass
class Item:
    """One chunk of a bucket, read: its events and their verified bodies; ``events`` None
    when too few events were left; ``error`` when a body failed verification."""

    bucket: Bucket
    first: bool
    events: list[MemoryEvent] | None = None
    bodies: dict[uuid.UUID, str] | None = None
    error: DomainError | None = None


_DONE = object()


class Reader:
    """Reads the next chunk (its events, then its bodies through ``events.read_bodies``) on a
    thread and session of its own while the run summarises and writes the current one, so
    the bucket's I/O overlaps the summariser's work. The queue holds one chunk: at most three
    chunks' bodies are in memory at once, whatever the number of buckets.

    The rows it hands over are detached from its session, so the run reads their loaded
    attributes without touching that session from another thread."""

    def __init__(self, session: Session, plane: DataPlane, tenant_id: uuid.UUID, actor: Actor,
                 *, min_events: int, chunk_sizes: Callable[[int], list[int]],
                 buckets: Sequence[Bucket], cutoff: datetime) -> None:
        self.session, self.plane, self.tenant_id, self.actor = session, plane, tenant_id, actor
        self.min_events, self.chunk_sizes = min_events, chunk_sizes
        self.buckets, self.cutoff = buckets, cutoff
        self.queue: queue.Queue[object] = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True,
                                       name=f"{threading.current_thread().name}:compact-reader")
        self.thread.start()

    def __iter__(self) -> Iterator[Item]:
        while True:
            item = self.queue.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, Item)
            yield item

    def close(self) -> None:
        self.stop.set()
        while self.thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self.queue.get(timeout=0.05)
        self.thread.join()

    def _put(self, item: object) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        from ..events import service as events_service

        session = Session(self.session.get_bind(), expire_on_commit=False, autoflush=False)
        try:
            for bucket in self.buckets:
                if self.stop.is_set():
                    return
                # The bucket qualified by its old events; all its uncompressed events go.
                events = repo.bucket_events(session, self.tenant_id, bucket,
                                            limit=bucket.events)
                session.commit()
                # Detach the rows (the session holds nothing else between buckets): one
                # expunge_all, not an expunge per row, whose cascade walk costs more than the
                # row's load.
                session.expunge_all()
                if len(events) < self.min_events:
                    if not self._put(Item(bucket, True)):
                        return
                    continue
                for n, chunk in enumerate(by_subject(events, self.chunk_sizes)):
                    item = Item(bucket, n == 0, chunk)
                    try:
                        item.bodies = events_service.read_bodies(
                            session, self.plane, self.tenant_id, chunk, actor=self.actor)
                    except HashMismatch as exc:
                        item.error = exc
                    if session.in_transaction():
                        session.commit()
                    if not self._put(item):
                        return
                    if item.error is not None:
                        break
            self._put(_DONE)
        except BaseException as exc:  # the run raises it (storage down, database gone …)
            session.rollback()
            self._put(exc)
        finally:
            session.close()
