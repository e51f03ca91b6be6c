"""The export's memories, read a window at a time.

A window is a run of a page's pointers holding at most ``WINDOW_BYTES`` of content (and at
most ``WINDOW_ITEMS`` pointers). Its objects are fetched (a cloud bucket's four at a time),
then opened, hash-verified (I3) and packed for the archive by a thread per core (AES-GCM,
SHA-256 and ISA-L's deflate run outside the GIL), while the export's own thread writes the
window before into the archive (:class:`Reader`: ``start`` a window,
then ``finish`` the one before). A task opens only objects sealed under a subject key the
export looked up again for its window, so a key destroyed during the export opens nothing
after that; an object under a key not looked up yet comes back to the export's thread,
which looks the key up and opens it there. An object that is missing, does not open or does
not match its hash is read again through the memory service's verified read, which follows
a memory overwritten meanwhile to its new version, answers 404 for one deleted, and marks
and audits real corruption; the item says which. At most two windows' objects are in memory
at a time.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from storage_adapters import envelope
from storage_adapters.envelope import DecryptionError

from ..db.models import MemoryPointer
from ..errors import HashMismatch, NotFound
from ..identity import Actor
from ..keys import repository as keys_repo
from ..keys import subject_keys as keys
from ..kit import sha256_hex
from ..memories import service as memories
from ..memories.batch_sets import all_near
from ..plane.data_plane import DataPlane, Target, storage_errors
from ..plane.keyring import Keyring
from ..plane.shared_pool import SharedPool
from .zipwriter import Packed, pack

# Objects are opened and packed by a thread per core, at most eight, so that an export on a
# machine of many cores does not hold a value per core in memory (each thread's buffers
# come from its own malloc arena, which keeps what it freed). A cloud bucket's objects are
# fetched four at a time first, by threads of their own. Both are shared by all tenants
# (plane/shared_pool.py): a tenant's work never queues behind another tenant's. One export
# takes a packer per core; a value that finds none free is kept for the export's next free
# packer, or packed by the export's own thread if it needs the value first (``defer``), so the
# export's thread keeps writing the archive while its packers pack, as a minimal pipeline's
# writer does. The pool has one packer more, so another tenant's export still has one
# besides its own thread.
_THREADS = min(8, max(2, os.cpu_count() or 1))
_packers = SharedPool(_THREADS + 1, "memplane-export", share=_THREADS)
_fetchers = SharedPool(4, "memplane-export-fetch")
# A window holds enough values to keep every packer busy while the one before is written:
# two values per packer from a local bucket, one from a cloud bucket, whose fetched objects
# and clients' buffers are in memory beside the windows (the export's peak RSS stays under
# the bench's 100 MiB bar on every backend).
WINDOW_BYTES = max(8, 2 * _THREADS) << 20
FAR_WINDOW_BYTES = max(4, _THREADS) << 20
WINDOW_ITEMS = 64
# A window of a local bucket with less content than this is read in the export's own
# thread: handing small objects to the pool costs more than the work.
_POOLED_BYTES = 256 << 10
_UNSETTLED = ("pending_delete", "pending_write")


@dataclass(frozen=True)
class Read:
    """One pointer's outcome: the version read (the page's, or a newer one the verified read
    followed), its status and, when exported, its value packed for the archive."""

    pointer: MemoryPointer
    status: str  # exported | missing | corrupt | deleted_during_export
    member: Packed | None


@dataclass(frozen=True)
class _Job:
    pointer_id: uuid.UUID
    path: str
    sha256: str
    adapter: Any
    max_bytes: int  # what the pointer allows the stored object (envelope.sealed_size)


@dataclass(frozen=True)
class _Sealed:
    """An object under a subject key the window was not given: opened by the export."""

    blob: bytes
    key_id: uuid.UUID


_Outcome = Packed | _Sealed | None


@dataclass(frozen=True)
class Started:
    window: list[MemoryPointer]
    ready: list[MemoryPointer]
    jobs: list[_Job]
    outcomes: list[Future[_Outcome]]


def windows(page: list[MemoryPointer], limit: int | None = None
            ) -> Iterator[list[MemoryPointer]]:
    """The page in runs of at most ``limit`` bytes of content (default ``WINDOW_BYTES``)
    and ``WINDOW_ITEMS`` pointers; a value larger than the limit is a window alone."""
    limit = WINDOW_BYTES if limit is None else limit
    window: list[MemoryPointer] = []
    size = 0
    for pointer in page:
        content = pointer.content_size or 0
        if window and (size + content > limit or len(window) >= WINDOW_ITEMS):
            yield window
            window, size = [], 0
        window.append(pointer)
        size += content
    if window:
        yield window


class Reader:
    """Reads an export's windows, one in flight while the one before is written."""

    def __init__(self, session: Session, plane: DataPlane, actor: Actor) -> None:
        self._session = session
        self._plane = plane
        self._actor = actor
        self._encrypted = plane.keys is not None and plane.keys.enabled
        self._keys: dict[uuid.UUID, bytes] = {}  # unwrapped subject keys by id
        self._targets: dict[uuid.UUID, Target] = {}  # the page's buckets by configuration

    def windows(self, page: list[MemoryPointer]) -> Iterator[list[MemoryPointer]]:
        """The page's windows, smaller when any of its values is in a cloud bucket. Call it
        for each page before ``start``ing its windows: it finds the page's buckets."""
        self._targets = {cid: self._plane.by_id(self._session, cid)
                         for cid in {p.storage_config_id for p in page}}
        self._session.commit()
        adapters = [target.adapter for target in self._targets.values()]
        return windows(page, WINDOW_BYTES if all_near(adapters) else FAR_WINDOW_BYTES)

    def start(self, window: list[MemoryPointer]) -> Started:
        """The window's reads under way (its settled pointers; one being written or deleted
        is reported ``deleted_during_export``). A window costs the database one statement,
        outside any transaction: the keys destroyed since the window before."""
        session = self._session
        ready = [p for p in window if p.sync_status not in _UNSETTLED]
        targets = self._targets
        self._look_keys_up_again()
        if session.in_transaction():  # the window before read a pointer again
            session.commit()
        jobs = [_Job(p.id, p.storage_path, p.content_sha256,
                     targets[p.storage_config_id].adapter, envelope.sealed_size(p.content_size))
                for p in ready]
        tenant_id, bulkheads = self._actor.tenant_id, self._plane.bulkheads
        task = partial(_open_and_pack, tenant_id, self._encrypted, dict(self._keys))
        if not all_near(t.adapter for t in targets.values()):
            fetched = [_fetchers.submit(tenant_id, bulkheads, _fetch, job) for job in jobs]
            outcomes = [_packers.submit(tenant_id, None, _after, task, job, blob, defer=True)
                        for job, blob in zip(jobs, fetched, strict=True)]
        elif sum(p.content_size or 0 for p in ready) < _POOLED_BYTES:
            outcomes = [_done(task(job, _fetch(job))) for job in jobs]
        else:
            outcomes = [_packers.submit(tenant_id, bulkheads,
                                        lambda job: task(job, _fetch(job)), job, defer=True)
                        for job in jobs]
        return Started(window, ready, jobs, outcomes)

    def finish(self, started: Started) -> list[Read]:
        """Each pointer's :class:`Read`, in the window's order."""
        read: dict[uuid.UUID, Read] = {}
        outcomes = self._open_sealed(started.jobs,
                                     [outcome.result() for outcome in started.outcomes])
        for pointer, got in zip(started.ready, outcomes, strict=True):
            if got is None or pointer.sync_status == "corrupt":
                read[pointer.id] = _read_again(self._session, self._plane, self._actor,
                                               pointer)
            else:
                read[pointer.id] = Read(pointer, "exported", got)
        return [read.get(p.id) or Read(p, "deleted_during_export", None)
                for p in started.window]

    def _look_keys_up_again(self) -> None:
        """Forget the keys destroyed since the window before (one statement on its own, as
        the database holds them now): what they sealed is read again, and no longer opens."""
        if self._keys:
            live = keys_repo.live_key_ids(self._session, self._actor.tenant_id,
                                          list(self._keys))
            self._keys = {k: v for k, v in self._keys.items() if k in live}

    def _open_sealed(self, jobs: list[_Job], outcomes: list[_Outcome]) -> list[Packed | None]:
        """The window's objects sealed under keys it was not given, opened once their keys
        are looked up (here), by the packers: the first window of an export is all such."""
        missing = {got.key_id for got in outcomes if isinstance(got, _Sealed)} - set(self._keys)
        for key_id in missing:
            try:
                self._keys[key_id] = keys.key_to_open(
                    self._session, self._keyring, self._actor.tenant_id, key_id)
            except DecryptionError:
                pass  # destroyed or unknown: its objects are read again
            finally:
                self._session.commit()
        task = partial(_open_and_pack, self._actor.tenant_id, self._encrypted,
                       dict(self._keys))
        opened = [_packers.submit(self._actor.tenant_id, None, task, job, got.blob, defer=True)
                  if isinstance(got, _Sealed) else _done(got)
                  for job, got in zip(jobs, outcomes, strict=True)]
        return [_packed(outcome.result()) for outcome in opened]

    @property
    def _keyring(self) -> Keyring:
        assert self._plane.keys is not None  # an envelope is only met with a keyring
        return self._plane.keys


def _packed(outcome: _Outcome) -> Packed | None:
    """An outcome still sealed under a key the export could not look up: None (read again)."""
    return None if isinstance(outcome, _Sealed) else outcome


def _done(outcome: _Outcome) -> Future[_Outcome]:
    future: Future[_Outcome] = Future()
    future.set_result(outcome)
    return future


def _fetch(job: _Job) -> bytes | None:
    try:
        with storage_errors(job.pointer_id):
            blob: bytes = job.adapter.get(job.path, job.max_bytes)
            return blob
    except Exception:  # read again by the verified read, which answers for it
        return None


def _after(task: Callable[[_Job, bytes | None], _Outcome], job: _Job,
           fetched: Future[bytes | None]) -> _Outcome:
    return task(job, fetched.result())


def _open_and_pack(tenant_id: uuid.UUID, encrypted: bool, known: dict[uuid.UUID, bytes],
                   job: _Job, blob: bytes | None) -> _Outcome:
    """The verified value packed for the archive; :class:`_Sealed` when its key is not in
    ``known``; None when it must be read again (``blob`` None: it could not be fetched)."""
    if blob is None:
        return None
    if envelope.is_envelope(blob):
        try:
            key_id = envelope.read_header(blob).key_id
        except DecryptionError:
            return None
        if key_id not in known:
            return _Sealed(blob, key_id)
        try:
            data = keys.open_with(tenant_id, job.path, job.pointer_id, blob, known[key_id])
        except DecryptionError:
            return None
    elif encrypted:  # a plain object where a sealed one belongs: the verified read says so
        return None
    else:
        data = blob
    if sha256_hex(data) != job.sha256:
        return None
    return pack(data)


def _read_again(session: Session, plane: DataPlane, actor: Actor,
                pointer: MemoryPointer) -> Read:
    try:
        got = memories.read_pointer(session, plane, actor, pointer, raw=True)
    except HashMismatch as exc:
        status = "missing" if exc.extra.get("reason") == "missing" else "corrupt"
        return Read(pointer, status, None)
    except NotFound:
        return Read(pointer, "deleted_during_export", None)
    return Read(got.pointer, "exported", pack(got.value))
