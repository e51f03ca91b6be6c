"""How several indexers on PostgreSQL split the work: each claims its batch with advisory
locks held by a transaction of its own until the batch is recorded, skips what another
holds, and re-checks what it got."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import Connection, Engine, select
from sqlalchemy import text as sql
from sqlalchemy.orm import Session

from ..db.models import MemoryPointer
from . import index_rows

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
            select(P).where(P.id.in_(held), index_rows.wants_vector())
            .order_by(P.updated_at)).all()
        fresh = index_rows.snapshots(session, fresh)
        session.commit()
        return fresh

    def release(self) -> None:
        """End the claim's transaction (its advisory locks go) and return its connection."""
        if self._connection is not None:
            try:
                self._connection.close()  # back to the pool, rolled back
            finally:
                self._connection = None

    close = release
