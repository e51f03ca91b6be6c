"""An erasure whose verification finds the subject's memory, events or compactor entries again
(a write that passed its block check before the block, committing later) runs its delete
steps again: the next round deletes what came back, and only then is the receipt written.
Writes that come back in three rounds in a row fail the attempt instead of a fourth round."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from control_plane.compactor import selection
from control_plane.compactor import service as compactor
from control_plane.compliance import service as compliance
from control_plane.compliance.erasure_walk import ErasureWalk
from control_plane.db.models import Compaction, ErasureReceipt, Job, SubjectErasure
from control_plane.identity import Actor
from tests.retention.helpers import event, event_rows, objects, own_world, pointers, put
from tests.support.service import ServiceWorld


@pytest.fixture
def lone_world(database: str, request: pytest.FixtureRequest,
               tmp_path: Path) -> Iterator[ServiceWorld]:
    """A world on a database no other test uses: a job worker here takes only this test's
    jobs."""
    with own_world(database, request, tmp_path) as world:
        yield world


@contextmanager
def _unblocked(world: ServiceWorld, subject: str) -> Iterator[None]:
    """Writes inside run as writes that checked the block before it was set: the block row
    is lifted for them alone, then put back."""
    with world.runtime.sessions() as session:
        block = session.get(SubjectErasure, (world.tenant_id, subject))
        assert block is not None
        saved = {c.key: getattr(block, c.key) for c in SubjectErasure.__table__.columns}
        session.delete(block)
        session.commit()
    yield
    with world.runtime.sessions() as session:
        session.add(SubjectErasure(**saved))
        session.commit()


def _late_write(world: ServiceWorld, subject: str, n: int) -> None:
    """A memory, an event and an orphan object of the subject (its writer died after its
    put, before its pointer committed)."""
    with _unblocked(world, subject):
        put(world, "user", subject, f"late-{n}")
        event(world, datetime.now(UTC), scope="user", ref=subject)
        with world.runtime.sessions() as session:
            target = world.runtime.plane.active(session, world.tenant_id)
        target.adapter.put(target.path(f"memories/user/{subject}/orphan-{n}/v.json"), b"{}")


def _late_compaction(world: ServiceWorld, subject: str, *, mixed: bool) -> None:
    """The compactor folds the bucket's events into entries, as a run that read them before
    the block and committed after it. ``mixed``: as the compactor did before each subject's
    events got an entry of their own, one entry for every subject of the bucket."""
    with _unblocked(world, subject), pytest.MonkeyPatch.context() as patch:
        if mixed:
            patch.setattr(selection, "by_subject", lambda events, _sizes: [list(events)])
        with world.runtime.sessions() as session:
            counts = compactor.compact_tenant(
                session, world.runtime.plane, world.runtime.settings, world.tenant_id,
                actor=Actor(world.tenant_id, "system", "test-compactor")).as_dict()
    assert (counts["entries_written"], counts["events_compressed"]) == (1 if mixed else 2, 6)


def _erase(world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, subject: str, *,
           after: str, inject: Callable[[int], None],
           max_attempts: int | None = None) -> tuple[Job, int]:
    """Erase ``subject`` with a job worker; ``inject(n)`` runs after the step ``after`` of
    each round n (1, 2, …). Returns the job and the number of rounds that ran."""
    from control_plane.job_handlers import JobWorker

    real_step = getattr(ErasureWalk, after)
    rounds: list[int] = []

    def step_then_inject(self: ErasureWalk, *args: Any, **kwargs: Any) -> None:
        real_step(self, *args, **kwargs)
        rounds.append(len(rounds) + 1)
        inject(rounds[-1])

    monkeypatch.setattr(ErasureWalk, after, step_then_inject)
    with world.runtime.sessions() as session:
        compliance.start_erasure(session, world.actor, subject, dry_run=False)
    settings = world.runtime.settings
    if max_attempts is not None:
        settings = settings.model_copy(update={"job_max_attempts": max_attempts})
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, settings,
                       owner="test-worker")
    while worker.run_once() is not None:
        pass
    monkeypatch.setattr(ErasureWalk, after, real_step)
    with world.runtime.sessions() as session:
        job = session.scalars(select(Job).where(Job.tenant_id == world.tenant_id,
                                                Job.kind == "erase")
                              .order_by(Job.created_at.desc())).first()
    assert job is not None
    return job, len(rounds)


def test_a_write_that_comes_back_is_deleted_by_the_next_round(
        lone_world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    put(lone_world, "user", "u-late", "k")
    event(lone_world, datetime.now(UTC), scope="user", ref="u-late")

    def two_writes(n: int) -> None:
        if n <= 2:
            _late_write(lone_world, "u-late", n)

    job, rounds = _erase(lone_world, monkeypatch, "u-late", after="delete_events",
                         inject=two_writes)

    # one attempt: the rounds themselves deleted each write (none failed the attempt)
    assert (job.state, job.attempts, rounds) == ("completed", 1, 3), job.error
    assert job.result is not None and job.result["receipt_id"]
    counts = job.result["counts"]
    assert (counts["pointers"], counts["events"]) == (3, 3)
    assert set(pointers(lone_world)) == set()
    assert objects(lone_world, "memories/user/u-late") == set()
    assert objects(lone_world, "events/user/u-late") == set()


def test_writes_that_keep_coming_back_fail_the_erasure_after_three_rounds(
        lone_world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    put(lone_world, "user", "u-busy", "k")

    def three_writes(n: int) -> None:
        if n <= 3:
            _late_write(lone_world, "u-busy", n)

    job, rounds = _erase(lone_world, monkeypatch, "u-busy", after="delete_events",
                         inject=three_writes, max_attempts=1)

    assert (job.state, job.attempts, rounds) == ("failed", 1, 3)
    assert job.error == ("ErasureIncomplete: writes kept reappearing for the subject; "
                         "rerun the erasure")
    assert "receipt_id" not in job.progress
    with lone_world.runtime.sessions() as session:
        receipts = session.scalar(select(func.count()).select_from(ErasureReceipt).where(
            ErasureReceipt.tenant_id == lone_world.tenant_id))
        blocked = session.get(SubjectErasure, (lone_world.tenant_id, "u-busy"))
    assert receipts == 0
    assert blocked is not None  # the subject's writes stay refused until an erasure ends
    assert set(pointers(lone_world)) == {"late-3"}

    # rerun, as the error says: it deletes the last write and ends with a receipt
    rerun, _ = _erase(lone_world, monkeypatch, "u-busy", after="delete_events",
                      inject=lambda n: None)
    assert rerun.id != job.id
    assert (rerun.state, rerun.attempts) == ("completed", 1), rerun.error
    assert rerun.result is not None and rerun.result["counts"]["pointers"] == 1
    assert set(pointers(lone_world)) == set()
    assert objects(lone_world, "memories/user/u-busy") == set()


@pytest.mark.parametrize("mixed", [False, True], ids=["own-entry", "mixed-entry"])
def test_a_compactor_entry_that_comes_back_is_deleted_by_the_next_round(
        lone_world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, mixed: bool) -> None:
    old = datetime.now(UTC) - timedelta(days=120)  # due for compaction (default: 90 days)
    for minutes in range(3):  # the default least number of events for a bucket, each
        event(lone_world, old + timedelta(minutes=minutes), user_id="u-folded")
        event(lone_world, old + timedelta(minutes=minutes), user_id="u-bystander")

    def compaction_after_the_first_compactor_step(n: int) -> None:
        if n == 1:
            _late_compaction(lone_world, "u-folded", mixed=mixed)

    job, rounds = _erase(lone_world, monkeypatch, "u-folded", after="delete_pointers",
                         inject=compaction_after_the_first_compactor_step)

    assert (job.state, job.attempts, rounds) == ("completed", 1, 2), job.error
    assert job.result is not None
    counts = job.result["counts"]
    # the second round's compactor step found the entry (not the pointer step, which
    # would count it as a memory and release no other subject's events)
    assert (counts["compactor_entries"], counts["compactor_events_released"],
            counts["events"], counts["pointers"]) == (1, 3 if mixed else 0, 3, 0)
    with lone_world.runtime.sessions() as session:
        left = session.scalars(select(Compaction.id).where(
            Compaction.tenant_id == lone_world.tenant_id)).all()
    bystander_entries = [p for p in pointers(lone_world).values()
                         if p.subject_user_id == "u-bystander"]
    assert sorted(left) == sorted(p.id for p in bystander_entries)
    assert len(left) == (0 if mixed else 1)
    assert set(pointers(lone_world)) == {str(p.id) for p in bystander_entries}
    assert objects(lone_world, "memories/entity/ent_acme") == {
        p.storage_path for p in bystander_entries}
    remaining = event_rows(lone_world)
    assert {e.subject_user_id for e in remaining} == {"u-bystander"}
    # released for the next run to fold again, or still folded in their own entry
    assert all((e.compressed_at is None) == mixed for e in remaining)
