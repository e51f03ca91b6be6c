"""An erasure whose verification finds the subject's memory or events again (a write that
passed its block check before the block, committing later) runs its delete steps again:
the next round deletes what came back, and only then is the receipt written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.compliance import service as compliance
from control_plane.compliance.erasure_walk import ErasureWalk
from control_plane.db.models import Job, SubjectErasure
from tests.retention.helpers import event, objects, own_world, pointers, put
from tests.support.service import ServiceWorld


@pytest.fixture
def lone_world(database: str, request: pytest.FixtureRequest,
               tmp_path: Path) -> Iterator[ServiceWorld]:
    """A world on a database no other test uses: a job worker here takes only this test's
    jobs."""
    with own_world(database, request, tmp_path) as world:
        yield world


def _in_flight_write(world: ServiceWorld, subject: str, n: int) -> None:
    """A memory, an event and an orphan object of the subject, from writes that checked the
    block before it was set: the block row is lifted for them alone, then put back."""
    with world.runtime.sessions() as session:
        block = session.get(SubjectErasure, (world.tenant_id, subject))
        assert block is not None
        saved = {c.key: getattr(block, c.key) for c in SubjectErasure.__table__.columns}
        session.delete(block)
        session.commit()
    put(world, "user", subject, f"late-{n}")
    event(world, datetime.now(UTC), scope="user", ref=subject)
    # and an object whose pointer never committed (the writer died after its put)
    with world.runtime.sessions() as session:
        target = world.runtime.plane.active(session, world.tenant_id)
    target.adapter.put(target.path(f"memories/user/{subject}/orphan-{n}/v.json"), b"{}")
    with world.runtime.sessions() as session:
        session.add(SubjectErasure(**saved))
        session.commit()


def _erase(world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, subject: str,
           writes: int) -> tuple[Job, int]:
    """Erase ``subject`` with a job worker; the first ``writes`` rounds each see a write
    come back between their delete steps and their verification. Returns the job and the
    number of rounds that ran."""
    from control_plane.job_handlers import JobWorker

    real_delete_events = ErasureWalk.delete_events
    rounds: list[int] = []

    def a_late_write_after_the_deletes(self: ErasureWalk, *args: Any, **kwargs: Any) -> None:
        real_delete_events(self, *args, **kwargs)
        rounds.append(len(rounds))
        if len(rounds) <= writes:
            _in_flight_write(world, subject, len(rounds))

    monkeypatch.setattr(ErasureWalk, "delete_events", a_late_write_after_the_deletes)
    put(world, "user", subject, "k")
    event(world, datetime.now(UTC), scope="user", ref=subject)
    with world.runtime.sessions() as session:
        compliance.start_erasure(session, world.actor, subject, dry_run=False)
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                       owner="test-worker")
    while worker.run_once() is not None:
        pass
    with world.runtime.sessions() as session:
        job = session.scalars(select(Job).where(Job.tenant_id == world.tenant_id,
                                                Job.kind == "erase")).one()
    return job, len(rounds)


def test_a_write_that_comes_back_is_deleted_by_the_next_round(
        lone_world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    job, rounds = _erase(lone_world, monkeypatch, "u-late", writes=2)

    assert (job.state, rounds) == ("completed", 3), job.error
    assert job.result is not None and job.result["receipt_id"]
    assert set(pointers(lone_world)) == set()
    assert objects(lone_world, "memories/user/u-late") == set()
