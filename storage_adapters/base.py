"""The data-plane contract: one small Protocol every storage backend implements.

Paths are bucket-relative object keys using ``/`` as separator (``tenants/t1/memories/…``);
the adapter is rooted at one bucket, container or directory and never sees anything above it.

Normalised semantics, identical on every backend, so services never branch on the backend:

- ``get``/``head`` of a missing object raise :class:`ObjectNotFound` (a ``FileNotFoundError``);
- ``put`` is create-only: an existing object raises :class:`ObjectExists` (on a network
  backend, unless it holds exactly the bytes put: a retry found its own first attempt);
- ``delete_many`` of missing objects succeeds (deletes are idempotent);
- a backend that cannot be reached raises :class:`StorageUnavailable`;
- rejected credentials raise :class:`StorageAuthError`;
- a stored object whose bytes fail the backend's own checksum raises :class:`IntegrityError`.

Error tree::

    StorageError
    ├── ObjectNotFound (also FileNotFoundError)
    ├── ObjectExists (also FileExistsError)
    ├── IntegrityError
    │   └── ObjectTooLarge (more bytes than the read allowed; storage_adapters/bounded)
    ├── StorageUnavailable
    │   ├── DeadlineExceeded (the call ran past its deadline; storage_adapters/bounded)
    │   ├── BucketNotFound
    │   └── EndpointRefused (the address guard refused the endpoint; storage_adapters/netguard)
    ├── StorageAuthError
    │   └── PermissionDenied (the credentials are valid but may not do this)
    ├── InvalidPath (also ValueError)
    └── InvalidStorageClass (also ValueError)

What a tenant is told about a failure is only :func:`problem_code` of it — one of
``unreachable``, ``auth_failed``, ``bucket_not_found``, ``permission_denied``,
``endpoint_not_allowed`` — never the message, which may quote what the remote answered.

Storage classes: every adapter maps three generic names — ``standard``, ``archive``,
``cold`` — onto its backend's classes (S3 ``STANDARD``/``STANDARD_IA``/``GLACIER_IR``, GCS
``STANDARD``/``NEARLINE``/``COLDLINE``, Azure ``Hot``/``Cool``/``Cold``; the local and memory
adapters record the generic name), overridable per adapter with ``archive_class`` and
``cold_class``. Only classes whose objects read back at once are offered (no S3 Glacier
Flexible Retrieval / Deep Archive, no Azure Archive tier), so a read of an archived object is
an ordinary verified read.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


class StorageError(Exception):
    """Base of every error an adapter raises."""


class ObjectNotFound(StorageError, FileNotFoundError):
    """The object does not exist."""


class ObjectExists(StorageError, FileExistsError):
    """A create-only put found an object already at that path."""


class IntegrityError(StorageError):
    """The stored bytes do not match their checksum."""


class StorageUnavailable(StorageError):
    """The backend could not be reached or answered with a server error."""


class BucketNotFound(StorageUnavailable):
    """The bucket or container does not exist."""


class EndpointRefused(StorageUnavailable):
    """The endpoint, or the address it resolved to, is not one this server may connect to."""


class StorageAuthError(StorageError):
    """The backend rejected the credentials."""


class PermissionDenied(StorageAuthError):
    """The backend accepted the credentials but refused the operation."""


PROBLEMS = ("unreachable", "auth_failed", "bucket_not_found", "permission_denied",
            "endpoint_not_allowed")


def problem_code(exc: BaseException) -> str:
    """The generic problem code a tenant may see for an adapter failure."""
    if isinstance(exc, EndpointRefused):
        return "endpoint_not_allowed"
    if isinstance(exc, BucketNotFound):
        return "bucket_not_found"
    if isinstance(exc, PermissionDenied):
        return "permission_denied"
    if isinstance(exc, StorageAuthError):
        return "auth_failed"
    # Everything else looks the same from outside, so an open port that answers garbage and
    # a closed one cannot be told apart.
    return "unreachable"


class InvalidPath(StorageError, ValueError):
    """The path is empty, absolute, or climbs out of the adapter's root."""


class InvalidStorageClass(StorageError, ValueError):
    """The backend has no storage class of that name, or none whose objects read at once."""


GENERIC_STORAGE_CLASSES = ("standard", "archive", "cold")


@dataclass(frozen=True, slots=True)
class StorageClasses:
    """One backend's storage classes: the generic names (lower case) mapped to its own, and
    every name of its own it accepts (compared without regard to case)."""

    standard: str
    archive: str
    cold: str
    accepted: tuple[str, ...]

    def with_overrides(self, archive: str | None = None, cold: str | None = None
                       ) -> StorageClasses:
        """The same classes with ``archive``/``cold`` mapped elsewhere (a storage config's
        ``archive_class``/``cold_class``); a name the backend does not accept is refused."""
        return StorageClasses(
            self.standard,
            self.native(archive) if archive else self.archive,
            self.native(cold) if cold else self.cold, self.accepted)

    def native(self, name: str) -> str:
        """The backend's name for ``name``: a generic name or one of the backend's own."""
        wanted = (name or "").strip()
        if wanted in GENERIC_STORAGE_CLASSES:  # lower case only: Azure has an "Archive" tier
            return str(getattr(self, wanted))
        for accepted in self.accepted:
            if accepted.lower() == wanted.lower():
                return accepted
        raise InvalidStorageClass(
            f"unknown storage class {name!r}; use one of "
            f"{', '.join((*GENERIC_STORAGE_CLASSES, *self.accepted))}")


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    path: str
    size: int
    last_modified: datetime | None = None
    # The backend's name of the object's storage class, where ``head`` reports it (listings
    # leave it None).
    storage_class: str | None = None


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One stored version of an object, or a delete marker (S3) / soft-deleted copy."""

    path: str
    version_id: str | None
    is_delete_marker: bool = False
    is_latest: bool = False
    size: int = 0
    last_modified: datetime | None = None


@dataclass(frozen=True, slots=True)
class BucketDescription:
    """What the bucket keeps after a delete, as far as the backend reports it."""

    backend: str
    bucket: str
    region: str | None = None
    versioning: bool = False
    soft_delete_days: float | None = None
    object_lock: bool = False
    retention_days: float | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HealthReport:
    ok: bool
    latency_ms: float
    detail: str
    description: BucketDescription | None = None
    # problem_code() of the failure; None when the probe succeeded.
    problem: str | None = None


@dataclass(slots=True)
class RequestStats:
    """Counts of backend requests by kind (``put``, ``get``, ``delete_batch`` …)."""

    counts: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()


@runtime_checkable
class StorageAdapter(Protocol):
    """A bucket, container or directory holding memory content."""

    scheme: str
    stats: RequestStats

    def put(self, path: str, data: bytes) -> None:
        """Store ``data`` at ``path``, create-only, sending the backend's native checksum.

        Raises ObjectExists if an object is already there.
        """

    def get(self, path: str, max_bytes: int | None = None) -> bytes:
        """Return the object's bytes.

        ObjectNotFound if missing, IntegrityError if the backend's checksum fails,
        ObjectTooLarge if the object has (or the backend sends) more than ``max_bytes``:
        nothing past the bound is read. A network backend's read ends at its call deadline
        (DeadlineExceeded).
        """

    def head(self, path: str) -> ObjectInfo:
        """Return size, time and storage class of the object; ObjectNotFound if missing."""

    def delete_many(self, paths: Iterable[str]) -> int:
        """Delete the current version of each path, batched within the backend's limit.

        Missing paths are not an error. Returns how many paths were asked for.
        """

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every current object whose path starts with ``prefix``, paged lazily."""

    def list_versions(self, prefix: str) -> Iterator[ObjectVersion]:
        """Every version, delete marker and soft-deleted copy under ``prefix``.

        On a backend without versions this is the current objects, one version each.
        """

    def purge_versions(self, prefix: str) -> int:
        """Permanently remove every version and delete marker under ``prefix``.

        Returns how many versions were removed.
        """

    def describe(self) -> BucketDescription:
        """Versioning, soft delete, object lock and retention as the backend reports them."""

    def health_check(self) -> HealthReport:
        """Write, read and delete a probe object; report latency and the description."""

    def close(self) -> None:
        """Release clients and connection pools."""

    def storage_class_name(self, storage_class: str) -> str:
        """The backend's name for a generic (``standard``, ``archive``, ``cold``) or native
        class name, without asking the backend; InvalidStorageClass for an unknown one."""

    def set_storage_class(self, path: str, storage_class: str) -> str:
        """Move the object to ``storage_class`` (generic or native) and return the backend's
        name of the class it now has.

        The bytes do not change, so checksums and the service's SHA-256 still verify. Where the
        backend rewrites the object to change its class (S3 copy onto itself, GCS rewrite), a
        versioned bucket's previous version is deleted, so the object keeps one version.
        Already in that class: nothing is rewritten. ObjectNotFound if missing.
        """


def check_path(path: str) -> str:
    """Reject paths that are empty, absolute, or contain ``.``/``..`` segments or NULs."""
    if not path or path.startswith("/") or "\x00" in path or "\\" in path:
        raise InvalidPath(f"invalid object path {path!r}")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidPath(f"invalid object path {path!r}")
    return path


def check_prefix(prefix: str) -> str:
    """A listing prefix may be empty; otherwise the same rules as a path apply."""
    if prefix == "":
        return prefix
    return check_path(prefix.rstrip("/")) + ("/" if prefix.endswith("/") else "")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of at most ``size`` items (the backends' batch limits)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def purge_paths(adapter: StorageAdapter, paths: Iterable[str]) -> int:
    """Remove every version and delete marker of exactly these objects.

    Versions are found with one listing per directory of a scope (``…/<scope_ref>/``) rather
    than one per object, and removed in the backend's batches where it offers
    ``delete_versions`` (S3: 1,000 per request); otherwise object by object.
    """
    wanted = set(paths)
    groups: dict[str, list[str]] = {}
    for path in wanted:
        groups.setdefault(path.rsplit("/", 2)[0] + "/" if path.count("/") >= 2 else "",
                          []).append(path)
    delete_versions = getattr(adapter, "delete_versions", None)
    if delete_versions is None:
        return sum(adapter.purge_versions(path) for path in sorted(wanted))
    found: list[ObjectVersion] = []
    for directory, members in sorted(groups.items()):
        prefix = members[0] if len(members) == 1 else directory
        found += [v for v in adapter.list_versions(prefix) if v.path in wanted]
    return int(delete_versions(found))


def timed_probe(adapter: StorageAdapter, probe_path: str) -> HealthReport:
    """Shared health check: write, read back and delete one small object."""
    payload = f"memplane health probe {time.time_ns()}".encode()
    started = time.perf_counter()
    try:
        adapter.put(probe_path, payload)
        if adapter.get(probe_path, len(payload)) != payload:
            raise IntegrityError("probe object read back different bytes")
        adapter.delete_many([probe_path])
        description = adapter.describe()
    except StorageError as exc:
        latency = (time.perf_counter() - started) * 1000
        return HealthReport(ok=False, latency_ms=latency, detail=f"{type(exc).__name__}: {exc}",
                            problem=problem_code(exc))
    latency = (time.perf_counter() - started) * 1000
    return HealthReport(
        ok=True, latency_ms=latency, detail="write, read and delete succeeded",
        description=description,
    )


@runtime_checkable
class StreamingAdapter(Protocol):
    """Optional: adapters that can store and read large objects without holding them in memory.

    Adapters without it still work with :func:`put_file` and :func:`iter_object`, which fall
    back to ``put``/``get`` with the whole object in memory.
    """

    def put_file(self, path: str, file: BinaryIO) -> None:
        """Store the rest of ``file`` at ``path``, create-only, like ``put``."""

    def iter_chunks(self, path: str, chunk_size: int, max_bytes: int | None = None
                    ) -> Iterator[bytes]:
        """Yield the object's bytes in chunks; ObjectNotFound if missing (raised on first
        ``next``); ObjectTooLarge past ``max_bytes``, as ``get``."""


@runtime_checkable
class BatchAdapter(Protocol):
    """Optional: adapters that store many objects together faster than one by one (a local
    directory: one round of fsyncs for all). Others are put side by side."""

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> list[StorageError | None]:
        """``put`` of each ``(path, data)``; per item None (stored, durable) or the error
        ``put`` would have raised."""


def holds_exactly(adapter: StorageAdapter, path: str, data: bytes) -> bool:
    """Whether ``path`` already holds exactly ``data``. A network backend's create-only put
    whose answer was lost (a read timeout) is retried by its client, and the retry finds the
    first attempt's object: that is the put done, not a conflict. Read only on that rare
    path, bounded at ``len(data)``; anything but the same bytes is the conflict it seems."""
    try:
        return adapter.get(path, max_bytes=len(data)) == data
    except StorageError:
        return False


def put_file(adapter: StorageAdapter, path: str, file: BinaryIO) -> None:
    """Store a file-like object, streamed where the adapter supports it."""
    if isinstance(adapter, StreamingAdapter):
        adapter.put_file(path, file)
    else:
        adapter.put(path, file.read())


def iter_object(adapter: StorageAdapter, path: str, chunk_size: int = 1 << 20,
                max_bytes: int | None = None) -> Iterator[bytes]:
    """Read an object in chunks, streamed where the adapter supports it, at most
    ``max_bytes`` of it (ObjectTooLarge past that)."""
    if isinstance(adapter, StreamingAdapter):
        yield from adapter.iter_chunks(path, chunk_size, max_bytes)
        return
    data = adapter.get(path, max_bytes)
    for start in range(0, len(data), chunk_size):
        yield data[start:start + chunk_size]


# -- streaming helpers for the cloud adapters ---------------------------------------------

STREAM_PART_BYTES = 8 << 20
"""What a cloud adapter's ``put_file`` sends per part (S3), block (Azure) or chunk (GCS),
and its ``iter_chunks`` fetches per ranged request: a streamed object holds at most about
this much of itself in memory at once. A smaller file goes in one ordinary ``put``."""


def read_block(file: BinaryIO, size: int) -> bytes:
    """The next ``size`` bytes of ``file``, fewer only where it ends (a raw file or a pipe
    may answer a read with less than was asked before its end)."""
    first = file.read(size)
    if not first or len(first) >= size:
        return bytes(first)
    parts, have = [first], len(first)
    while have < size:
        more = file.read(size - have)
        if not more:
            break
        parts.append(more)
        have += len(more)
    return b"".join(parts)


def rechunk(pieces: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The bytes of ``pieces`` in chunks of exactly ``size`` (the last may be shorter)."""
    if size <= 0:
        raise ValueError("chunk_size must be positive")
    pending = bytearray()
    for piece in pieces:
        if not pending and len(piece) == size:
            yield bytes(piece)
            continue
        pending += piece
        while len(pending) >= size:
            yield bytes(pending[:size])
            del pending[:size]
    if pending:
        yield bytes(pending)
