"""An erasure stopped dead between its steps (as a killed worker would be) is taken over
by another worker once the lease expires, and finishes with a receipt whose counts are
those of one clean run."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import erasure_walk
from control_plane.compliance import service as compliance
from control_plane.compliance.receipts import served
from control_plane.db.models import AccessLog, ErasureReceipt, MemoryPointer
from control_plane.errors import SubjectErasureInProgress
from control_plane.job_handlers import JobWorker
from control_plane.keys.pseudonyms import pseudonym
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.signing import signing_key
from memplane._receipts import verify_receipt
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld, SimulatedCrash

from .helpers import bucket_paths, job, write_subject

SUBJECT, BYSTANDER = "alice", "bob"


LEASE = 3600.0  # the workers share a manual clock: the test moves it past the lease


def _worker(world: ServiceWorld, name: str, clock: ManualWallClock) -> JobWorker:
    return JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                     owner=name, lease_seconds=LEASE, clock=clock)


@pytest.mark.parametrize("step, occurrence", [
    ("erase:after_block", 1),
    ("erase:after_mark", 2),
    ("erase:after_objects", 2),      # objects of batch 2 gone, its rows not yet
    ("erase:after_batch", 1),
    ("erase:after_sweep", 1),
    ("erase:after_keys", 1),
    ("erase:before_receipt", 1),
])
def test_a_killed_erasure_is_taken_over_and_counts_once(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch, step: str,
        occurrence: int) -> None:
    monkeypatch.setattr(erasure_walk, "BATCH", 40)
    subject = write_subject(world, SUBJECT, 100)
    bystander = write_subject(world, BYSTANDER, 30)
    seen = {"n": 0}

    def crash(at: str) -> None:
        if at == step:
            seen["n"] += 1
            if seen["n"] == occurrence:
                raise SimulatedCrash(at)

    world.runtime.plane.checkpoint = crash
    clock = ManualWallClock()
    with world.runtime.sessions() as session:
        queued = compliance.start_erasure(session, world.actor, SUBJECT, dry_run=False)
    with pytest.raises(SimulatedCrash):
        _worker(world, "first", clock).run_once()
    assert job(world, queued.id).state == "running"
    if step != "erase:after_block":
        with world.runtime.sessions() as session, pytest.raises(SubjectErasureInProgress):
            memories.set_value(session, world.runtime.plane, world.actor,
                               MemoryAddress.parse(Scope.user, SUBJECT, "late"), 1, MemoryMeta())
    assert _worker(world, "second", clock).run_once() is None  # the lease still holds
    clock.advance(LEASE + 1)  # the dead worker's lease runs out
    assert _worker(world, "second", clock).run_once() == queued.id

    finished = job(world, queued.id)
    # the raw id is gone from the job: only a keyed hash names the subject
    hashed = pseudonym(world.runtime.plane.credentials, world.tenant_id, SUBJECT)
    assert (finished.state, finished.attempts, finished.subject) == ("completed", 2, hashed)
    with world.runtime.sessions() as session:
        assert finished.result is not None
        receipt = session.get(ErasureReceipt, uuid.UUID(finished.result["receipt_id"]))
        assert receipt is not None
        body = {**served(receipt.body, world.runtime.plane.credentials),
                "signature": receipt.signature}
        remaining = session.scalar(select(func.count()).select_from(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id,
            MemoryPointer.subject_user_id == SUBJECT))
        takeovers = session.scalar(select(func.count()).select_from(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "job_takeover"))
    assert body["counts"]["pointers"] == 100
    assert body["counts"]["objects"] == 100
    assert body["work_done"] is True
    assert remaining == 0 and takeovers == 1
    assert verify_receipt(body, signing_key(world.runtime.settings).public_pem())
    assert bucket_paths(world) == set(bystander)
    assert not set(subject) & bucket_paths(world)
    # writes for the subject work again once the erasure is over
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor,
                           MemoryAddress.parse(Scope.user, SUBJECT, "after"), 1, MemoryMeta())


def test_a_finished_erasure_whose_worker_died_before_recording_it_answers_its_result(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler returned (receipt stored, result saved in the job's progress) but its
    worker died before marking the job completed: the worker taking it over answers the
    saved result, and runs no step again."""
    write_subject(world, SUBJECT, 12)
    clock = ManualWallClock()
    with world.runtime.sessions() as session:
        queued = compliance.start_erasure(session, world.actor, SUBJECT, dry_run=False)
    first = _worker(world, "first", clock)

    def dies_before_recording(*_args: object, **_outcome: object) -> None:
        raise SimulatedCrash("job recorded")

    monkeypatch.setattr(first, "_finish", dies_before_recording)
    with pytest.raises(SimulatedCrash):
        first.run_once()
    stopped = job(world, queued.id)
    assert stopped.state == "running"
    saved = stopped.progress["result"]
    assert saved["receipt_id"] == stopped.progress["receipt_id"]
    erase_rows_before = _erase_rows(world)

    clock.advance(LEASE + 1)  # the dead worker's lease runs out
    assert _worker(world, "second", clock).run_once() == queued.id

    finished = job(world, queued.id)
    assert (finished.state, finished.attempts) == ("completed", 2), finished.error
    assert finished.result == saved
    assert finished.progress == stopped.progress  # no step saved anything again
    assert _erase_rows(world) == erase_rows_before
    with world.runtime.sessions() as session:
        receipts = session.scalars(select(ErasureReceipt.id).where(
            ErasureReceipt.tenant_id == world.tenant_id)).all()
    assert [str(r) for r in receipts] == [saved["receipt_id"]]


def _erase_rows(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "erase")) or 0)
