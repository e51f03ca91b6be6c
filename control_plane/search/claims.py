"""How several indexers split the work: each claims its batch with locks held until the batch
is recorded, skips what another holds, and re-checks what it got. On PostgreSQL the locks are
advisory locks of a transaction of its own (``Claims``); on a SQLite file, the indexers of one
host (the server's processes and its background process) take byte-range locks on a file
beside the database (``FileClaims``)."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, Engine, select
from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from ..db.models import MemoryPointer
from . import index_rows

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

_CLAIM_CLASS = 0x4D505658  # "MPVX": the first key of the indexer's advisory locks
_COMPACT_CLASS = 0x4D505643  # "MPVC": the first key of a scope's compaction lock


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

    def take(self, session: Session, candidates: Sequence[uuid.UUID],
             limit: int) -> list[MemoryPointer]:
        """The pointers of up to ``limit`` of the ``candidates`` (pointer ids, in order)
        locked for this indexer and still waiting for their vector (another indexer may have
        recorded it between the candidates' read and the lock)."""
        session.commit()
        if not candidates:
            return []
        if self._connection is None:
            self._connection = self.engine.connect()
        held = list(self._connection.execute(_TAKE, {
            "ids": list(candidates), "keys": [_lock_key(i) for i in candidates],
            "c": _CLAIM_CLASS, "n": limit}).scalars())
        return still_waiting(session, held)

    def release(self) -> None:
        """End the claim's transaction (its advisory locks go) and return its connection."""
        if self._connection is not None:
            try:
                self._connection.close()  # back to the pool, rolled back
            finally:
                self._connection = None

    close = release


def scope_key(tenant_id: uuid.UUID, scope: str, scope_ref: str) -> int:
    """The second key of a scope's compaction lock: 32 bits of a digest of the scope."""
    digest = hashlib.blake2b(f"{tenant_id}\x1f{scope}\x1f{scope_ref}".encode(),
                             digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextmanager
def compacting(engine: Engine, tenant_id: uuid.UUID, scope: str,
               scope_ref: str) -> Iterator[bool]:
    """Whether this process may compact the scope now. On PostgreSQL, where the background
    process of every host and each ``memplane worker`` run indexers that compact, a
    session-level advisory lock per scope, taken without waiting on a connection of its own
    and held for the block: the indexer that finds it held leaves the scope to the one
    compacting it (before, both compacted and the later one's work was thrown away). A
    crashed compactor's connection ends and its lock goes. On SQLite the host's background
    process is the one indexer that compacts (the server's helpers never do): always True."""
    if engine.dialect.name != "postgresql":
        yield True
        return
    key = {"c": _COMPACT_CLASS, "k": scope_key(tenant_id, scope, scope_ref)}
    with engine.connect() as connection:
        held = bool(connection.scalar(sql("SELECT pg_try_advisory_lock(:c, :k)"), key))
        connection.commit()
        try:
            yield held
        finally:
            if held:
                connection.execute(sql("SELECT pg_advisory_unlock(:c, :k)"), key)
                connection.commit()


def still_waiting(session: Session, held: Sequence[uuid.UUID]) -> list[MemoryPointer]:
    """Of the pointers just claimed, those still waiting for their vector, in write order,
    taken out of ``session`` (``index_rows.snapshots``)."""
    if not held:
        return []
    P = MemoryPointer
    fresh = session.scalars(
        select(P).where(P.id.in_(held), index_rows.wants_vector())
        .order_by(P.updated_at)).all()
    fresh = index_rows.snapshots(session, fresh)
    session.commit()
    return fresh


class FileClaims:
    """``Claims`` for the indexers of a SQLite file, all on one host: an exclusive lock on
    one byte of ``path`` per pointer (POSIX byte-range locks, offset by the pointer id's
    random bits), taken without waiting and released once the batch is recorded. The lock
    of a process that dies goes with it.

    POSIX record locks belong to the process, not to the thread or the descriptor: two
    ``FileClaims`` in one process never exclude each other, and closing any descriptor of
    the file would drop the process's locks. So a process runs one indexer (the server's
    helper, or the background process's indexer) and opens the file once, here."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._held: set[int] = set()

    @staticmethod
    def available() -> bool:
        return fcntl is not None

    def take(self, session: Session, candidates: Sequence[uuid.UUID],
             limit: int) -> list[MemoryPointer]:
        """As ``Claims.take``."""
        session.commit()
        return still_waiting(session, self.hold(candidates, limit))

    def hold(self, ids: Sequence[uuid.UUID], limit: int) -> list[uuid.UUID]:
        """Up to ``limit`` of ``ids``, in order, locked for this process (those another
        process holds are skipped), until ``release``."""
        if not ids or fcntl is None:
            return []
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        held: list[uuid.UUID] = []
        for pointer_id in ids:
            offset = _lock_key(pointer_id) & 0x7FFFFFFF
            if offset in self._held:
                continue  # a candidate whose key another of this batch shares
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset, os.SEEK_SET)
            except OSError:  # another process holds it (EAGAIN or EACCES)
                continue
            self._held.add(offset)
            held.append(pointer_id)
            if len(held) >= limit:
                break
        return held

    def release(self) -> None:
        """Let go of the batch's locks (the file stays open: see the class)."""
        if self._fd is None or fcntl is None:
            return
        held, self._held = self._held, set()
        for offset in held:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, offset, os.SEEK_SET)

    def close(self) -> None:
        self.release()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
