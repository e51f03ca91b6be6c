"""Group commit for audit rows of reads.

A read writes nothing but its audit row, and that row must be durable before the content is
served (I6). Committing each row on its own makes every read pay a full commit; here the
rows of concurrent reads share one.

Leader and followers, no background thread: a reader that finds no commit in flight becomes
the leader and commits the queued rows itself in one INSERT committed on its own: on
PostgreSQL a single round trip in autocommit (a lone row on a pooled connection, a batch on
the batcher's own, in a statement whose text is the same for any number of rows); on SQLite
one executemany in a transaction on the batcher's own driver connection. Readers arriving
meanwhile queue their rows and wait; when the leader's commit is done it wakes them, and
hands the lead to the first of those still queued. One reader alone pays exactly one round
trip and no thread hand-off; sixteen at once share commits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, insert, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError

from ..db import direct
from ..db.base import utcnow
from ..db.models import AccessLog
from ..kit import request_id_var

log = logging.getLogger(__name__)


def _no_checkpoint(step: str) -> None:
    """Tests replace this to hold a reader at a named step ("queued": its row is queued;
    "commit": as leader, about to commit a batch; "timed-out": a follower's wait ran out);
    in production it does nothing."""


checkpoint: Callable[[str], None] = _no_checkpoint

_COLUMNS = ("tenant_id", "pointer_id", "event_id", "accessor_type", "accessor_id", "operation",
            "success", "detail", "request_id", "accessed_at", "agent_id")
_INSERT_ONE = text(f"INSERT INTO access_logs ({', '.join(_COLUMNS)}) "
                   f"VALUES ({', '.join(':' + c for c in _COLUMNS)})")
# PostgreSQL: any number of rows in ONE statement whose text never changes (one array per
# column), so it is compiled once and the driver prepares it. A multi-row VALUES has a new
# text for each batch size: SQLAlchemy compiled it afresh and psycopg parsed it afresh for
# every commit (about 0.4 ms of the leader's CPU at 16 concurrent reads).
_ARRAY_TYPES = {"tenant_id": "uuid", "pointer_id": "uuid", "event_id": "uuid",
                "success": "boolean", "accessed_at": "timestamptz"}
_INSERT_MANY = text(
    f"INSERT INTO access_logs ({', '.join(_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"CAST(:{c} AS {_ARRAY_TYPES.get(c, 'text')}[])" for c in _COLUMNS) + ")")


# SQLite: the insert compiled once, with SQLAlchemy's own conversions of each column (ids,
# booleans, times: stored exactly as an ORM insert stores them), run as one executemany in
# one transaction on the batcher's own connection: without SQLAlchemy's per-execution work,
# ~0.2 ms of every commit (a lone read's, or a search's).
_SQLITE_INSERT = insert(AccessLog).compile(dialect=sqlite.dialect(),
                                           column_keys=list(_COLUMNS))
_SQLITE_ORDER: list[str] = list(_SQLITE_INSERT.positiontup or ())
_SQLITE_PROCESSORS: dict[str, Any] = dict(_SQLITE_INSERT._bind_processors)


def _insert_sqlite(conn: Connection, rows: list[dict[str, object]]) -> None:
    values = [[_SQLITE_PROCESSORS[name](row[name]) if name in _SQLITE_PROCESSORS else row[name]
               for name in _SQLITE_ORDER] for row in rows]
    driver: Any = conn.connection.driver_connection
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        cursor = driver.cursor()
        try:
            cursor.execute("BEGIN")
            try:
                cursor.executemany(_SQLITE_INSERT.string, values)
                cursor.execute("COMMIT")
            except BaseException:
                if driver.in_transaction:
                    cursor.execute("ROLLBACK")
                raise
        finally:
            cursor.close()
    except dbapi_error as exc:  # as SQLAlchemy would have raised it
        raise DBAPIError.instance(_SQLITE_INSERT.string, values, exc, dbapi_error,
                                  dialect=conn.dialect) from exc


@dataclass(eq=False)
class _Pending:
    row: dict[str, object]
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # woken to lead the next commit, not because its row is committed
    error: BaseException | None = None


class AuditBatcher:
    def __init__(self, engine: Engine, *, max_batch: int = 500) -> None:
        self._engine = engine
        self._conn: Connection | None = None  # used by the leader only: one at a time
        self._max_batch = max_batch
        self._queue: list[_Pending] = []
        self._leading = False
        self._lock = threading.Lock()
        self._stopped = False

    def record(self, tenant_id: object, accessor_type: str, accessor_id: str, operation: str,
               *, pointer_id: object = None, detail: str = "", timeout: float = 30,
               agent_id: str | None = None) -> None:
        """Append one row and return once it is committed; raises if the commit failed."""
        pending = _Pending({
            "tenant_id": tenant_id, "pointer_id": pointer_id, "event_id": None,
            "accessor_type": accessor_type, "accessor_id": accessor_id,
            "operation": operation, "success": True, "detail": detail[:2000],
            "request_id": request_id_var.get(), "accessed_at": utcnow(), "agent_id": agent_id,
        })
        with self._lock:
            if self._stopped:
                raise RuntimeError("the audit batcher is stopped")
            self._queue.append(pending)
            lead = not self._leading
            self._leading = True
        checkpoint("queued")
        while not lead:
            if not pending.done.wait(timeout):
                checkpoint("timed-out")
                with self._lock:
                    if pending in self._queue and not pending.lead:
                        self._queue.remove(pending)
                        raise TimeoutError("the audit row was not committed in time")
                continue  # committed, or handed the lead, just now
            if not pending.lead:
                break
            pending.lead, lead = False, True
            pending.done.clear()
        if lead:
            self._lead(pending)
        if pending.error is not None:
            raise pending.error

    def record_many(self, tenant_id: object, accessor_type: str, accessor_id: str,
                    operation: str, rows: list[tuple[object, str]], *,
                    agent_id: str | None = None) -> None:
        """Append one row per ``(pointer_id, detail)`` in ONE insert committed on its own,
        now (the reads of a batch already share their commit; queueing them behind other
        readers would only add waits); returns once it is committed, raises if it failed."""
        self.record_operations(tenant_id, accessor_type, accessor_id,
                               [(operation, pointer_id, detail) for pointer_id, detail in rows],
                               agent_id=agent_id)

    def record_operations(self, tenant_id: object, accessor_type: str, accessor_id: str,
                          rows: Sequence[tuple[str, object, str]], *,
                          agent_id: str | None = None) -> None:
        """``record_many`` with an operation per row (``(operation, pointer_id, detail)``):
        e.g. a search's ``search`` row and the ``read`` rows of the values it answers, in
        one insert committed on its own."""
        if not rows:
            return
        now, request_id = utcnow(), request_id_var.get()
        values = [{"tenant_id": tenant_id, "pointer_id": pointer_id, "event_id": None,
                   "accessor_type": accessor_type, "accessor_id": accessor_id,
                   "operation": operation, "success": True, "detail": detail[:2000],
                   "request_id": request_id, "accessed_at": now, "agent_id": agent_id}
                  for operation, pointer_id, detail in rows]
        if self._engine.dialect.name == "postgresql":
            direct.run(self._engine, _INSERT_MANY,
                       {c: [row[c] for row in values] for c in _COLUMNS})
            return
        with self._engine.connect() as conn:
            _insert_sqlite(conn, values)

    def _lead(self, mine: _Pending) -> None:
        """Commit batches until this caller's row is committed, then pass the lead on."""
        while not mine.done.is_set():
            with self._lock:
                batch = self._queue[:self._max_batch]
                del self._queue[:self._max_batch]
            self._commit(batch)
        with self._lock:
            if self._queue:
                successor = self._queue[0]
                successor.lead = True
                successor.done.set()
            else:
                self._leading = False

    def _commit(self, batch: list[_Pending]) -> None:
        error: BaseException | None = None
        try:
            checkpoint("commit")
            rows = [p.row for p in batch]
            try:
                self._insert(rows)
            except DBAPIError as exc:
                if not exc.connection_invalidated:
                    raise
                # The server had closed the connection (a restart, an idle timeout, an
                # operator): once more on a fresh one, or these reads fail for a connection
                # that was gone before they came.
                log.info("audit batch: the connection was closed; retrying on a fresh one")
                self._drop_connection()
                self._insert(rows)
        except BaseException as exc:  # every waiter must hear of it, whatever it was
            log.warning("audit batch of %d rows failed: %s", len(batch), type(exc).__name__)
            error = exc
            self._drop_connection()  # it may be broken: the next leader starts on a fresh one
        for pending in batch:
            pending.error = error
            pending.done.set()

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.invalidate()
            self._conn.close()
            self._conn = None

    def _insert(self, rows: list[dict[str, object]]) -> None:
        conn = self._conn
        if conn is None:
            conn = self._conn = self._engine.connect()
            if self._engine.dialect.name == "postgresql":
                conn.execution_options(isolation_level="AUTOCOMMIT")
        if conn.dialect.name == "postgresql":
            # One statement, committed on its own: atomic, a single round trip.
            if len(rows) == 1:
                direct.run(self._engine, _INSERT_ONE, rows[0])
                return
            conn.execute(_INSERT_MANY, {c: [row[c] for row in rows] for c in _COLUMNS})
            conn.commit()  # a no-op under autocommit (ends SQLAlchemy's own bookkeeping)
            return
        _insert_sqlite(conn, rows)

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            if self._conn is not None and not self._leading:
                self._conn.close()
                self._conn = None
