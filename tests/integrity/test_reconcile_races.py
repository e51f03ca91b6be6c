"""Two reconcilers at once (PostgreSQL: SQLite's writers queue, so the race cannot happen
there): the row lock makes one of them settle a pending write and the other find it settled."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import text

from control_plane.audit import service as audit
from control_plane.integrity.reconcile import ReconcileReport, reconcile
from tests.support.service import ServiceWorld

from .helpers import audit_rows, pointer, statuses, target


def _run(world: ServiceWorld) -> ReconcileReport:
    with world.runtime.sessions() as session:
        return reconcile(session, world.runtime.plane, grace_seconds=0,
                         tenant_id=world.tenant_id)


def _someone_waits_on_a_lock(world: ServiceWorld) -> bool:
    with world.runtime.engine.connect() as connection:
        return bool(connection.scalar(text(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
            "and datname = current_database()")))


@pytest.mark.databases("postgres")
def test_two_reconcilers_at_once_settle_a_pending_write_once(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    where = target(world)
    row = pointer(world, where, "once", "pending_write")
    reports: list[ReconcileReport] = []
    second = threading.Thread(target=lambda: reports.append(_run(world)))
    real_record = audit.record

    def record_then_let_a_second_reconciler_in(*args: Any, **kwargs: Any) -> None:
        real_record(*args, **kwargs)
        if second.ident is not None:
            return
        # The first reconciler holds the row (locked, not yet committed): the second one
        # either waits for that lock, or, without it, settles the same row itself.
        second.start()
        deadline = time.monotonic() + 60
        while second.is_alive() and not _someone_waits_on_a_lock(world):
            assert time.monotonic() < deadline, "the second reconciler neither waited nor ended"
            time.sleep(0.02)

    monkeypatch.setattr(audit, "record", record_then_let_a_second_reconciler_in)
    first = _run(world)
    second.join(timeout=60)
    monkeypatch.undo()
    assert [(r.writes_completed, r.writes_rolled_back, r.errors) for r in (first, *reports)] \
        == [(1, 0, []), (0, 0, [])]
    assert statuses(world) == {"once": "synced"}
    assert [r[3:] for r in audit_rows(world, "reconcile")] == [
        (row.id, "pending write completed")]
