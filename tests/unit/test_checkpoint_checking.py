"""What ``checkpoints.check`` reports for each kind of damage: the checkpoint it names, the
first row it leaves uncovered, its exact sentence, how many it checked, and whether it
waited for a write in flight (a clock of the test's own: no time passes, every wait is
counted). Embedded database and local bucket (``checkpoint_world.py``)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import delete, update

from control_plane.audit import checkpoints
from control_plane.audit.checkpoints import CheckpointReport
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditHead
from tests.unit.checkpoint_world import World, at, down, make_world


class Clock:
    """``checkpoints.time`` for the test: each sleep moves it one second on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[], None] | None = None

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += 1.0
        if self.on_sleep is not None:
            self.on_sleep()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(checkpoints, "time", fake)
    return fake


@pytest.fixture
def world(tmp_path: Path, clock: Clock) -> Iterator[World]:
    yield from make_world(tmp_path)


def _name(seq: int, moved: bool = False) -> str:
    return checkpoints.checkpoint_name(seq, moved=moved)


def _three(world: World) -> list[int]:
    seqs = []
    for i in range(3):
        world.append(2)
        assert world.anchor(at(10 * i)) is True
        seqs.append(world.head().anchored_seq)
    world.append(2)  # a tail after the last checkpoint
    return seqs


def _set_row_hash(world: World, seq: int, value: str | None) -> None:
    with world.sessions() as session:
        begin_write(session)
        where = (AccessLog.tenant_id == world.tenant, AccessLog.seq == seq)
        if value is None:
            session.execute(delete(AccessLog).where(*where))
        else:
            session.execute(update(AccessLog).where(*where).values(row_hash=value))
        session.commit()


def _problem(report: CheckpointReport) -> tuple[object, ...]:
    return (report.ok, report.checked, report.first_bad, report.first_uncovered_row,
            report.problem)


def test_a_report_is_frozen_and_starts_empty() -> None:
    report = CheckpointReport()
    assert dataclasses.astuple(report) == (0, None, None, None, None, None, 0, None, None, 0,
                                           0, ())
    assert report.ok is True and dataclasses.replace(report, problem="x").ok is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.checked = 1  # type: ignore[misc]


def test_a_tenant_without_checkpoints_agrees_with_its_empty_bucket(world: World,
                                                                   clock: Clock) -> None:
    world.append(2)
    assert world.check() == CheckpointReport(places=1)
    assert clock.sleeps == []


def test_a_chain_that_agrees_reports_what_it_checked(world: World, clock: Clock) -> None:
    seqs = _three(world)
    head = world.head()
    assert world.check() == CheckpointReport(
        checked=3, first_seq=seqs[0], last_seq=seqs[2], anchored_seq=seqs[2],
        anchored_at=at(20), places=1)
    assert head.last_seq > seqs[2] and clock.sleeps == []


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_rewritten_row_fails_the_checkpoint_that_signed_it(world: World, which: int) -> None:
    seqs = _three(world)
    _set_row_hash(world, seqs[which], "f" * 64)
    since = ([0] + seqs)[which]
    report = world.check()
    body = world.body(seqs[which])
    assert _problem(report) == (
        False, which + 1, seqs[which], since + 1,
        f"row {seqs[which]} in the database is not the row checkpoint {seqs[which]} signed "
        f"at {body['created_at']}: rows {since + 1} to {seqs[which]} were rewritten after it")
    assert (report.first_seq, report.last_seq, report.anchored_seq) == (seqs[0], seqs[2],
                                                                        seqs[2])


def test_a_removed_row_fails_the_checkpoint_that_signed_it(world: World) -> None:
    seqs = _three(world)
    _set_row_hash(world, seqs[1], None)
    assert _problem(world.check()) == (
        False, 2, seqs[1], seqs[0] + 1,
        f"the database has no sealed row {seqs[1]}, which checkpoint {seqs[1]} signed: rows "
        "were removed")


def test_a_damaged_checkpoint_is_named_with_what_agreed_before_it(world: World) -> None:
    seqs = _three(world)
    (world.folder() / _name(seqs[1])).write_text("not json")
    assert _problem(world.check()) == (
        False, 2, seqs[1], seqs[0] + 1,
        f"checkpoint {seqs[1]} in the bucket is not a well-formed checkpoint")


def test_a_damaged_move_record_before_any_checkpoint_counts_one_checked(world: World) -> None:
    _three(world)
    (world.folder() / _name(1, moved=True)).write_text("not json")
    assert _problem(world.check()) == (
        False, 1, 1, 1, "checkpoint 1 in the bucket is not a well-formed checkpoint")


@pytest.mark.parametrize("which", ["middle", "latest"])
def test_a_deleted_checkpoint_is_detected(world: World, clock: Clock, which: str) -> None:
    seqs = _three(world)
    if which == "middle":
        (world.folder() / _name(seqs[1])).unlink()
        assert _problem(world.check()) == (
            False, 2, seqs[2], seqs[0] + 1,
            f"checkpoint {seqs[2]} follows checkpoint {seqs[1]}, which is missing from the "
            "bucket: checkpoints were deleted")
    else:
        (world.folder() / _name(seqs[2])).unlink()
        report = world.check()
        assert _problem(report) == (
            False, 2, seqs[2], seqs[1] + 1,
            f"checkpoint {seqs[2]} was written into the bucket but is no longer there: "
            "checkpoints were deleted")
        assert (report.first_seq, report.last_seq) == (seqs[0], seqs[1])
    assert clock.sleeps == []


def test_a_record_set_back_is_reported_without_waiting(world: World, clock: Clock) -> None:
    seqs = _three(world)
    world.set_head(anchored_seq=seqs[0])  # attempted and finished at one moment: not in flight
    assert _problem(world.check()) == (
        False, 3, seqs[2], seqs[0] + 1,
        f"the operator's default bucket at 'tenants/{world.tenant}' holds signed checkpoint "
        f"{seqs[2]}, but the database records checkpoints only up to row {seqs[0]}: its "
        "record of the anchor was set back")
    assert clock.sleeps == []


def test_a_write_in_flight_is_waited_for_until_it_is_recorded(world: World, clock: Clock
                                                              ) -> None:
    seqs = _three(world)
    world.set_head(anchored_seq=seqs[1], anchored_at=at(10))  # claimed at(20), unrecorded
    clock.on_sleep = lambda: world.set_head(anchored_seq=seqs[2], anchored_at=at(20))
    report = world.check()
    assert (report.ok, report.checked, report.anchored_seq) == (True, 3, seqs[1])
    assert clock.sleeps == [0.05]


def test_a_write_in_flight_that_is_never_recorded_is_waited_for_five_seconds(
        world: World, clock: Clock) -> None:
    seqs = _three(world)
    world.set_head(anchored_seq=seqs[1], anchored_at=at(10))
    assert _problem(world.check())[:4] == (False, 3, seqs[2], seqs[1] + 1)
    assert clock.sleeps == [0.05] * 6  # at 0, 1, … 5 s after the start; at 6 s it gave up


def test_a_checkpoint_recorded_after_the_bucket_was_read_is_no_deletion(
        world: World, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    seqs = _three(world)
    real = checkpoints.anchors.survey

    def sealer_meanwhile(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = real(*args, **kwargs)
        assert world.anchor(at(30)) is True  # the tail, written and recorded
        return found

    monkeypatch.setattr(checkpoints.anchors, "survey", sealer_meanwhile)
    report = world.check()
    assert (report.ok, report.checked, report.last_seq, report.anchored_seq) == (
        True, 3, seqs[2], seqs[2])
    assert world.head().anchored_seq > seqs[2] and clock.sleeps == []


@pytest.mark.parametrize("created_at", ["at twenty", 20])
def test_a_checkpoint_whose_time_is_no_time_is_never_waited_for(
        world: World, clock: Clock, created_at: object) -> None:
    seqs = _three(world)
    world.sign_into({**world.body(seqs[2]), "created_at": created_at}, _name(seqs[2]))
    world.set_head(anchored_seq=seqs[1], anchored_at=at(10))
    assert _problem(world.check())[:4] == (False, 3, seqs[2], seqs[1] + 1)
    assert clock.sleeps == []


def test_a_tenant_whose_head_row_is_gone_is_held_to_its_checkpoints(world: World,
                                                                     clock: Clock) -> None:
    seqs = _three(world)
    with world.sessions() as session:
        begin_write(session)
        session.execute(delete(AuditHead).where(AuditHead.tenant_id == world.tenant))
        session.commit()
    report = world.check()
    assert _problem(report)[:4] == (False, 3, seqs[2], 1)
    assert (report.anchored_seq, report.anchored_at, report.anchor_problem) == (0, None, None)
    assert clock.sleeps == []


def test_a_bucket_that_cannot_be_read_is_a_problem_naming_no_checkpoint(world: World) -> None:
    _three(world)
    world.set_head(anchor_problem="unreachable")
    world.plane.faults["list:audit/checkpoints"] = down
    report = world.check()
    assert (report.ok, report.checked, report.first_bad, report.first_uncovered_row,
            report.places, report.moves, report.anchor_problem) == (
        False, 0, None, None, 0, 0, "unreachable")
    assert report.problem == (
        f"the checkpoints in the operator's default bucket at 'tenants/{world.tenant}' could "
        "not be read (unreachable); retry when the bucket is reachable")


def test_a_tenant_the_server_has_no_storage_for_is_reported_unreadable(world: World) -> None:
    report = world.check(uuid.UUID(int=7))
    assert report == CheckpointReport(problem=(
        "the checkpoints in the tenant's bucket could not be read (storage_misconfigured); "
        "retry when the bucket is reachable"))


# -- places and moves ------------------------------------------------------------------------


def test_a_checkpoint_continuing_elsewhere_without_a_move_record_is_reported(world: World
                                                                             ) -> None:
    seqs = _three(world)
    last = world.head().last_seq
    elsewhere = f"tenants/{world.tenant}/elsewhere"
    config = world.move_to(elsewhere)
    with world.sessions() as session:
        row_hash = session.get(AuditHead, world.tenant).last_hash  # type: ignore[union-attr]
    world.sign_into({"format": checkpoints.FORMAT, "tenant_id": str(world.tenant), "seq": last,
                     "row_hash": row_hash, "prev_seq": seqs[2], "created_at": at(30).isoformat(),
                     "key_id": world.key.key_id, "anchor": world.place(config, elsewhere)},
                    _name(last), elsewhere)
    world.set_head(anchored_seq=last, anchored_at=at(30), anchor_attempted_at=at(30))
    report = world.check()
    assert _problem(report) == (
        False, 4, last, 1,
        f"checkpoint {last} in the operator's default bucket at '{elsewhere}' continues from "
        f"checkpoint {seqs[2]} in the operator's default bucket at 'tenants/{world.tenant}', "
        "but no signed record of the anchor moving there was found: the anchor was moved by "
        "editing the database")
    assert (report.places, report.moves) == (2, 0)


def test_a_move_record_naming_a_configuration_the_database_lost_is_reported(world: World
                                                                            ) -> None:
    seqs = _three(world)
    gone = uuid.UUID(int=99)
    body = {**world.body(seqs[2]), "moved_to": {
        "storage_config_id": f"sc_{gone.hex}", "storage_type": "s3", "bucket": "b",
        "endpoint": None, "prefix": "p"}}
    world.sign_into(body, _name(seqs[2], moved=True))
    report = world.check()
    assert _problem(report) == (
        False, 0, seqs[2], 1,
        f"checkpoint {seqs[2]} in the operator's default bucket at 'tenants/{world.tenant}' "
        f"records that the anchor moved to storage configuration sc_{gone.hex}, a storage "
        "configuration the database no longer has: configurations were removed")
    assert (report.places, report.moves) == (1, 1)


def test_a_move_record_is_not_counted_as_a_checkpoint_checked(world: World) -> None:
    first = world.append(2)
    assert world.anchor(at(0)) is True
    world.move_to()
    seq = world.append(2)
    assert world.anchor(at(10)) is True
    report = world.check()
    assert (report.ok, report.checked, report.first_seq, report.last_seq, report.moves) == (
        True, 2, first, seq, 1)
    _set_row_hash(world, seq, "e" * 64)  # the move record fails first: it sorts first
    assert _problem(world.check())[:4] == (False, 1, seq, first + 1)
    _set_row_hash(world, seq, world.body(seq, prefix=f"tenants/{world.tenant}/moved")["row_hash"])
    last = world.append(1)
    assert world.anchor(at(20)) is True
    _set_row_hash(world, last, "e" * 64)
    report = world.check()
    assert _problem(report)[:4] == (False, 3, last, seq + 1)
    assert (report.places, report.moves) == (2, 1)
