"""Readers racing in the read-audit batcher (``control_plane/audit/batcher.py``), held at its
named checkpoints, for the ``--noconftest`` tests ``test_audit_batcher_*.py``: no server, the
batcher on the engine of a ``checkpoint_world`` (embedded SQLite, or a PostgreSQL cluster of
the test module's own)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from control_plane.audit.batcher import AuditBatcher
from control_plane.db.models import AccessLog
from control_plane.kit import request_id_var
from tests.unit.checkpoint_world import World

WAIT = 30  # seconds: only a deadlock ever waits this long
SHORT = 10  # seconds: a reader that should have returned at once


@dataclass
class Steps:
    """``batcher.checkpoint`` for a test: which thread reached which step, gates that hold a
    thread at a step, and actions run at a step (``on``)."""

    seen: list[tuple[str, str]] = field(default_factory=list)
    gates: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    arrived: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    on: dict[str, Callable[[str], None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hold(self, thread: str, step: str) -> threading.Event:
        """Stop ``thread`` at its next ``step`` until the returned event is set."""
        gate = self.gates[(thread, step)] = threading.Event()
        return gate

    def reached(self, thread: str, step: str) -> threading.Event:
        with self.lock:
            return self.arrived.setdefault((thread, step), threading.Event())

    def names(self, step: str) -> list[str]:
        return [name for name, seen in self.seen if seen == step]

    def __call__(self, step: str) -> None:
        name = threading.current_thread().name
        with self.lock:
            self.seen.append((name, step))
            gate = self.gates.pop((name, step), None)
            arrived = self.arrived.setdefault((name, step), threading.Event())
        arrived.set()
        if gate is not None:
            assert gate.wait(WAIT), f"{name} was held at {step} and never released"
        action = self.on.get(step)
        if action is not None:
            action(name)


class Reader(threading.Thread):
    """One read's audit row: ``outcome`` is None once it returned, or the error it raised;
    ``durable`` whether its row was in the database when record() returned."""

    def __init__(self, world: World, batcher: AuditBatcher, label: str, *,
                 tenant_id: uuid.UUID | None = None, timeout: float | None = WAIT,
                 request_id: str | None = None, **fields: Any) -> None:
        """``fields``: more of ``record``'s keywords (``pointer_id``, ``agent_id``)."""
        super().__init__(name=f"{label}-{uuid.uuid4().hex[:6]}", daemon=True)
        self.world, self.batcher, self.label = world, batcher, label
        self.tenant_id, self.timeout = tenant_id or world.tenant, timeout
        self.request_id, self.fields = request_id, fields
        self.outcome: BaseException | None | str = "not finished"
        self.durable: bool | None = None

    def run(self) -> None:
        kwargs: dict[str, Any] = {} if self.timeout is None else {"timeout": self.timeout}
        request_id_var.set(self.request_id)
        try:
            self.batcher.record(self.tenant_id, "api", "reader", "read", detail=self.label,
                                **kwargs, **self.fields)
        except BaseException as exc:  # the test looks at it
            self.outcome = exc
            return
        self.outcome = None
        self.durable = self.label in details(self.world)

    def finish(self, wait: float = WAIT) -> BaseException | None | str:
        self.join(wait)
        assert not self.is_alive(), f"{self.label} never returned"
        return self.outcome


def details(world: World) -> list[str]:
    with world.engine.connect() as conn:
        return sorted(conn.scalars(select(AccessLog.detail).where(
            AccessLog.operation == "read")))


def start_held(world: World, batcher: AuditBatcher, steps: Steps, label: str = "leader",
               step: str = "commit") -> tuple[Reader, threading.Event]:
    """A reader started and held at ``step`` (its first commit, as leader, by default)."""
    reader = Reader(world, batcher, label)
    release = steps.hold(reader.name, step)
    reader.start()
    assert steps.reached(reader.name, step).wait(WAIT)
    return reader, release


def queue(world: World, batcher: AuditBatcher, steps: Steps, *labels: str,
          tenant_ids: dict[str, uuid.UUID] | None = None,
          timeout: float | None = WAIT, **fields: dict[str, Any]) -> list[Reader]:
    """Readers started one after another, each once its row is queued; ``fields``: a label's
    more keywords (``f1={"pointer_id": …, "request_id": …}``)."""
    readers = []
    for label in labels:
        reader = Reader(world, batcher, label, timeout=timeout,
                        tenant_id=(tenant_ids or {}).get(label), **fields.get(label, {}))
        reader.start()
        assert steps.reached(reader.name, "queued").wait(WAIT)
        readers.append(reader)
    return readers


COLUMNS = (AccessLog.tenant_id, AccessLog.pointer_id, AccessLog.event_id,
           AccessLog.accessor_type, AccessLog.accessor_id, AccessLog.agent_id,
           AccessLog.operation, AccessLog.success, AccessLog.detail, AccessLog.request_id,
           AccessLog.accessed_at, AccessLog.seq)


def all_rows(world: World) -> list[tuple[Any, ...]]:
    """Every audit row's columns, in insertion order."""
    with world.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(*COLUMNS).order_by(AccessLog.id))]
