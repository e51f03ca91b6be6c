"""Moves of the anchor as the sealer writes them, and ``settle_unrecorded``: a checkpoint a
crash left written but unrecorded is recorded only when it is exactly the one the database
shows claimed and never finished (``checkpoint_world.py``: embedded database, local bucket)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from control_plane.audit import checkpoints
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, StorageConfig
from tests.unit.checkpoint_world import Plane, World, at, down, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _name(seq: int, moved: bool = False) -> str:
    return checkpoints.checkpoint_name(seq, moved=moved)


def _crashed_before_the_record(world: World, rows: int = 2) -> int:
    """A checkpoint put, the process stopped before recording it: the head claimed at the
    moment the checkpoint was signed (``at(10)``), its record still the one before."""
    first = world.append(rows)
    assert world.anchor(at(0)) is True
    seq = world.append(rows)
    assert world.anchor(at(10)) is True
    world.set_head(anchored_seq=first, anchored_at=at(0))
    return seq


# -- settle_unrecorded -----------------------------------------------------------------------


def test_a_checkpoint_put_but_never_recorded_is_settled_once(world: World) -> None:
    seq = _crashed_before_the_record(world)
    world.set_head(anchor_problem="unreachable", anchor_config_id=None)
    assert world.settle() is True
    head = world.head()
    assert (head.anchored_seq, head.anchored_at, head.anchor_attempted_at, head.anchor_problem,
            head.anchor_config_id) == (seq, at(10), at(10), None, world.config())
    assert world.settle() is False
    assert world.check().ok is True


def test_nothing_is_settled_for_an_unknown_tenant_or_one_never_attempted(world: World
                                                                         ) -> None:
    assert world.settle() is False  # never attempted
    assert world.settle(uuid.UUID(int=7)) is False
    world.append(2)
    assert world.anchor(at(0)) is True
    assert world.settle() is False  # recorded: attempted and finished at the same moment


def test_a_head_whose_last_write_was_recorded_is_answered_without_its_bucket(
        world: World, tmp_path: Path) -> None:
    own = world.move_to("", storage_type="local",
                        connection_config={"root": str(tmp_path / "own")})
    world.append(2)
    assert world.anchor(at(0)) is True
    world.append(1)  # rows since: a settle is asked for (reconcile asks for grown heads)
    with world.sessions() as session:  # the bucket no longer opens with the server key
        begin_write(session)
        session.execute(update(StorageConfig).where(StorageConfig.id == own)
                        .values(credentials_encrypted=b"sealed elsewhere"))
        session.commit()
    restarted = Plane(world.settings.resolved_bucket_url)
    try:
        with world.sessions() as session:
            assert checkpoints.settle_unrecorded(session, restarted, world.settings,
                                                 world.tenant) is False
    finally:
        restarted.close()


def test_a_checkpoint_signed_at_another_moment_than_the_claim_is_not_settled(world: World
                                                                              ) -> None:
    seq = _crashed_before_the_record(world)
    world.set_head(anchor_attempted_at=at(11))  # a later attempt claimed, and failed
    assert world.settle() is False
    assert world.head().anchored_seq < seq


def test_a_damaged_or_unreadable_checkpoint_is_not_settled(world: World) -> None:
    seq = _crashed_before_the_record(world)
    world.plane.faults["list:audit/checkpoints"] = down
    assert world.settle() is False
    del world.plane.faults["list:audit/checkpoints"]
    (world.folder() / _name(seq)).write_text("{}")
    assert world.settle() is False
    assert world.head().anchored_seq < seq


def test_a_claim_whose_write_failed_leaves_nothing_to_settle(world: World) -> None:
    world.append(2)
    world.plane.faults["put:audit/checkpoints/0"] = down
    assert world.anchor(at(0)) is False
    del world.plane.faults["put:audit/checkpoints/0"]
    assert world.files() == []
    assert world.settle() is False
    assert (world.head().anchored_seq, world.head().anchor_problem) == (0, "unreachable")


def test_nothing_is_settled_while_a_place_a_move_record_names_cannot_be_read(world: World
                                                                            ) -> None:
    seq = _crashed_before_the_record(world)
    gone = f"tenants/{world.tenant}/gone"
    world.sign_into({**world.body(seq), "seq": 1, "moved_to": world.place(None, gone)},
                    _name(1, moved=True))
    world.plane.faults[f"list:{gone}/"] = down
    assert world.settle() is False
    assert world.head().anchored_seq < seq
    del world.plane.faults[f"list:{gone}/"]
    assert world.settle() is True


def test_a_checkpoint_whose_created_at_is_no_time_is_not_settled(world: World) -> None:
    seq = _crashed_before_the_record(world)
    body = world.body(seq)
    world.sign_into({**body, "created_at": "at ten"}, _name(seq))
    assert world.settle() is False
    assert world.head().anchored_seq < seq


def test_a_checkpoint_outside_the_active_place_is_not_settled(world: World) -> None:
    seq = _crashed_before_the_record(world)
    world.move_to()
    assert world.settle() is False
    assert world.head().anchored_seq < seq


@pytest.mark.parametrize("meanwhile", ["claimed", "recorded"])
def test_a_settle_that_meets_another_sealer_records_nothing(
        world: World, monkeypatch: pytest.MonkeyPatch, meanwhile: str) -> None:
    seq = _crashed_before_the_record(world)
    real = checkpoints.anchors.survey

    def another_sealer(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = real(*args, **kwargs)
        if meanwhile == "claimed":  # a new attempt: the checkpoint is no longer its write
            world.set_head(anchor_attempted_at=at(12))
        else:  # the very checkpoint, recorded by another settle
            world.set_head(anchored_seq=seq, anchored_at=at(10))
        return found

    monkeypatch.setattr(checkpoints.anchors, "survey", another_sealer)
    assert world.settle() is False
    head = world.head()
    assert (head.anchored_seq == seq, head.anchored_at) == (
        (False, at(0)) if meanwhile == "claimed" else (True, at(10)))


# -- moves -----------------------------------------------------------------------------------


def test_a_move_is_recorded_in_the_old_place_and_named_by_the_new_places_first(
        world: World) -> None:
    first = world.append(2)
    assert world.anchor(at(0)) is True
    root = world.config()
    moved = world.move_to()
    seq = world.append(2)
    assert world.anchor(at(10)) is True
    with world.sessions() as session:
        row = session.scalars(select(AccessLog.seq).where(
            AccessLog.tenant_id == world.tenant,
            AccessLog.operation == "audit_anchor_moved")).one()
    head = world.head()
    assert (head.anchored_seq, row) == (seq, seq + 1) and head.anchor_config_id == moved
    new = f"tenants/{world.tenant}/moved"
    assert world.files() == [_name(first), _name(seq, moved=True)]
    assert world.files(new) == [_name(seq)]
    record, there = world.body(seq, moved=True), world.body(seq, prefix=new)
    assert (record["anchor"], record["moved_to"], record["prev_seq"], record["tlog"]["seq"]
            ) == (world.place(root), world.place(moved, new), first, row)
    assert (there["anchor"], there["moved_from"], there["prev_seq"]) == (
        world.place(moved, new), world.place(root), first)
    report = world.check()
    assert (report.ok, report.places, report.moves, report.checked) == (True, 2, 1, 2)

    # The move row is sealed after the head was read: the next checkpoint holds it.
    # A crash before the record: settled in the new place, not from the move record.
    world.set_head(anchored_seq=first, anchored_at=at(0), anchor_config_id=root)
    assert world.settle() is True
    assert (world.head().anchored_seq, world.head().anchor_config_id) == (seq, moved)


def test_a_move_without_a_sealer_is_not_written_and_recorded_as_a_problem(world: World
                                                                          ) -> None:
    first = world.append(2)
    assert world.anchor(at(0)) is True
    world.move_to()
    world.append(2)
    assert world.anchor(at(10), seal=False) is False
    head = world.head()
    assert (head.anchored_seq, head.anchor_problem, head.anchor_attempted_at) == (
        first, "error", at(10))
    assert world.files() == [_name(first)]
    assert world.files(f"tenants/{world.tenant}/moved") == []


def test_a_move_out_of_a_bucket_the_server_can_no_longer_open_is_recorded_in_the_root(
        world: World, tmp_path: Path) -> None:
    own = world.move_to("", storage_type="local",
                        connection_config={"root": str(tmp_path / "own")})
    first = world.append(2)
    assert world.anchor(at(0)) is True
    assert sorted(p.name for p in (tmp_path / "own" / "audit" / "checkpoints").iterdir()
                  if p.is_file()) == [_name(first)]
    with world.sessions() as session:  # its credentials no longer open with the server key
        begin_write(session)
        session.execute(update(StorageConfig).where(StorageConfig.id == own)
                        .values(credentials_encrypted=b"sealed elsewhere"))
        session.commit()
    moved = world.move_to()
    seq = world.append(1)
    restarted = Plane(world.settings.resolved_bucket_url)
    try:
        assert world.anchor(at(10), plane=restarted) is True
    finally:
        restarted.close()
    assert world.files() == [_name(first, moved=True), _name(seq, moved=True)]
    record = world.body(seq, moved=True)
    assert record["anchor"]["storage_config_id"] == f"sc_{own.hex}"
    assert record["moved_to"] == world.place(moved, f"tenants/{world.tenant}/moved")
    assert world.head().anchored_seq == seq


@pytest.mark.parametrize("root_has_it", [False, True])
def test_a_move_record_the_old_place_refuses_goes_to_the_root(world: World, tmp_path: Path,
                                                              root_has_it: bool) -> None:
    own = world.move_to("", storage_type="local",
                        connection_config={"root": str(tmp_path / "own")})
    first = world.append(2)
    assert world.anchor(at(0)) is True
    world.move_to()
    seq = world.append(1)
    if root_has_it:  # another sealer's record of the same move got there first
        (world.folder() / _name(seq, moved=True)).write_bytes(b"theirs")
    world.plane.faults["put:-moved.json"] = _refuse_outside_the_root(world)
    assert world.anchor(at(10)) is True
    assert world.head().anchored_seq == seq
    assert world.files() == [_name(first, moved=True), _name(seq, moved=True)]
    kept = sorted(p.name for p in (tmp_path / "own" / "audit" / "checkpoints").iterdir()
                  if p.is_file())
    assert kept == [_name(first)]
    if root_has_it:
        assert (world.folder() / _name(seq, moved=True)).read_bytes() == b"theirs"
    else:
        assert world.body(seq, moved=True)["anchor"]["storage_config_id"] == f"sc_{own.hex}"


def _refuse_outside_the_root(world: World):  # type: ignore[no-untyped-def]
    def fault(path: str) -> None:
        if not path.startswith(f"tenants/{world.tenant}/"):
            down(path)
    return fault
