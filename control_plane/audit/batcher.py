"""Group commit for audit rows of reads.

A read writes nothing but its audit row, and that row must be durable before the content is
served (I6). Committing each row on its own makes every read pay a full commit; here the
rows of concurrent reads are written together in one transaction, and each read waits until
the transaction holding its row has committed. One reader alone pays the same commit as
before; sixteen at once share it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import insert
from sqlalchemy.orm import Session

from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AccessLog
from ..kit import request_id_var

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    row: dict[str, object]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class AuditBatcher:
    def __init__(self, sessions: Callable[[], Session], *, max_batch: int = 500) -> None:
        self._sessions = sessions
        self._max_batch = max_batch
        self._queue: list[_Pending] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="memplane-audit-batcher",
                                        daemon=True)
        self._thread.start()

    def record(self, tenant_id: object, accessor_type: str, accessor_id: str, operation: str,
               *, pointer_id: object = None, detail: str = "", timeout: float = 30) -> None:
        """Append one row and return once it is committed; raises if the commit failed."""
        pending = _Pending({
            "tenant_id": tenant_id, "pointer_id": pointer_id, "event_id": None,
            "accessor_type": accessor_type, "accessor_id": accessor_id,
            "operation": operation, "success": True, "detail": detail[:2000],
            "request_id": request_id_var.get(), "accessed_at": utcnow(),
        })
        with self._wake:
            if self._stopped:
                raise RuntimeError("the audit batcher is stopped")
            self._queue.append(pending)
            self._wake.notify()
        if not pending.done.wait(timeout):
            raise TimeoutError("the audit row was not committed in time")
        if pending.error is not None:
            raise pending.error

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._stopped:
                    self._wake.wait()
                if not self._queue and self._stopped:
                    return
                batch, self._queue = self._queue[:self._max_batch], self._queue[self._max_batch:]
            error: BaseException | None = None
            try:
                with self._sessions() as session:
                    begin_write(session)
                    session.execute(insert(AccessLog), [p.row for p in batch])
                    session.commit()
            except BaseException as exc:  # every waiter must hear of it, whatever it was
                log.warning("audit batch of %d rows failed: %s", len(batch), type(exc).__name__)
                error = exc
            for pending in batch:
                pending.error = error
                pending.done.set()

    def close(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        self._thread.join(timeout=10)
