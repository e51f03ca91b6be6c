"""Writing the audit chain's signed checkpoints (``control_plane/audit/checkpoints.py``):
which head is signed, when, into which object of which place, with what content, what the
database records, and what a failed or interrupted write leaves. Exact outcomes on an
embedded database and a local bucket (``checkpoint_world.py``), no server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event, select

from control_plane.audit import checkpoints
from control_plane.db.models import AccessLog
from control_plane.errors import DomainError, NotFound, StorageMisconfigured
from storage_adapters import base as storage
from tests.unit.checkpoint_world import World, at, down, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _name(seq: int, moved: bool = False) -> str:
    return checkpoints.checkpoint_name(seq, moved=moved)


def _row_hash(world: World, seq: int) -> str:
    with world.sessions() as session:
        found = session.scalar(select(AccessLog.row_hash).where(
            AccessLog.tenant_id == world.tenant, AccessLog.seq == seq))
    assert found is not None
    return found


class _LongCode(DomainError):
    code = "c" * 70


def test_a_failed_write_is_recorded_by_a_generic_code() -> None:
    code = checkpoints._problem_code
    assert [code(storage.StorageUnavailable("x")), code(storage.BucketNotFound("x")),
            code(storage.StorageAuthError("x")), code(storage.ObjectNotFound("x")),
            code(storage.ObjectExists("x")), code(storage.StorageError("x")),
            code(StorageMisconfigured("x")), code(NotFound("x")), code(_LongCode("x")),
            code(RuntimeError("x"))] == [
        "unreachable", "unreachable", "auth_failed", "bucket_not_found", "storage_error",
        "storage_error", "storage_misconfigured", "not_found", "c" * 64, "error"]


def test_a_checkpoint_signs_the_head_into_its_seqs_object_and_is_recorded(world: World
                                                                          ) -> None:
    seq = world.append(3)
    assert world.anchor(at(0)) is True
    assert world.files() == [_name(seq)]
    raw = (world.folder() / _name(seq)).read_bytes()
    body = json.loads(raw)
    assert raw == json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    config = world.config()
    signature = body.pop("signature")
    assert body == {
        "format": "memplane-audit-checkpoint/1", "tenant_id": str(world.tenant), "seq": seq,
        "row_hash": _row_hash(world, seq), "prev_seq": 0, "created_at": at(0).isoformat(),
        "key_id": world.key.key_id, "anchor": world.place(config)}
    assert signature == world.key.sign(body)
    head = world.head()
    assert (head.anchored_seq, head.anchored_at, head.anchor_attempted_at,
            head.anchor_problem, head.anchor_config_id) == (seq, at(0), at(0), None, config)

    # Nothing new: nothing claimed, nothing written.
    assert world.anchor(at(1)) is False
    assert world.files() == [_name(seq)]
    assert world.head().anchor_attempted_at == at(0)

    # Without a cutoff the head is anchored whenever it moved, however recent the last one.
    later = world.append(2)
    assert world.anchor(at(2)) is True
    assert world.files() == [_name(seq), _name(later)]
    assert world.body(later)["prev_seq"] == seq
    assert (world.head().anchored_seq, world.head().anchored_at) == (later, at(2))
    with world.sessions() as session:  # no move: the tenant never left its place
        assert session.scalars(select(AccessLog.operation).where(
            AccessLog.tenant_id == world.tenant,
            AccessLog.operation == "audit_anchor_moved")).all() == []


def test_the_sealer_anchors_each_grown_tenant_once_per_interval(world: World) -> None:
    other = world.new_tenant()
    idle = world.new_tenant()
    first, theirs = world.append(3), world.append(2, other)
    assert world.due(at(0)) == 2
    assert [world.files(f"tenants/{t}") for t in (world.tenant, other, idle)] == [
        [_name(first)], [_name(theirs)], []]
    second = world.append(1)
    assert world.due(at(59)) == 0  # rows arrived, the interval has not passed
    assert world.files() == [_name(first)]
    assert world.head().anchor_attempted_at == at(0)
    assert world.due(at(60)) == 1  # the last attempt exactly one interval old: due
    assert world.files() == [_name(first), _name(second)]
    assert world.body(second)["created_at"] == at(60).isoformat()
    assert world.due(at(500)) == 0  # no new rows: no checkpoint, however long it waits
    assert world.files(f"tenants/{other}") == [_name(theirs)]
    assert world.head(idle).anchor_attempted_at is None


def test_a_due_anchor_with_a_recent_attempt_claims_nothing(world: World) -> None:
    seq = world.append(2)
    assert world.anchor(at(0)) is True
    world.append(1)
    with world.sessions() as session:
        assert checkpoints.anchor(session, world.plane, world.settings, world.tenant,
                                  now=at(30), cutoff=at(-30)) is False
    assert world.files() == [_name(seq)]
    assert world.head().anchor_attempted_at == at(0)


def test_tree_checkpoints_that_fail_do_not_hold_up_the_chains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Publishing the tree's checkpoints raises: the chain's are written all the same.
    from control_plane.audit import tlog_anchor

    def fails(*args: object, **kwargs: object) -> None:
        raise OverflowError("the tree's checkpoints failed")

    monkeypatch.setattr(tlog_anchor, "publish_due", fails)
    for world in make_world(tmp_path):
        seq = world.append(2)
        assert world.due(at(0)) == 1
        assert world.files() == [_name(seq)]
        assert world.head().anchored_seq == seq


def test_one_tenants_failure_does_not_stop_the_others_and_settles_later(world: World
                                                                        ) -> None:
    other = world.new_tenant()
    seqs = {world.tenant: world.append(2), other: world.append(3, other)}
    failed: list[str] = []

    def fail_once(_conn, _cursor, statement, _params, _context, _many):  # type: ignore[no-untyped-def]
        if not failed and statement.startswith("UPDATE audit_heads SET anchored_seq"):
            failed.append(statement)
            raise RuntimeError("the database went away at the record step")

    event.listen(world.engine, "before_cursor_execute", fail_once)
    try:
        assert world.due(at(0)) == 1
    finally:
        event.remove(world.engine, "before_cursor_execute", fail_once)
    assert len(failed) == 1
    heads = {t: world.head(t) for t in seqs}
    lost = [t for t in seqs if heads[t].anchored_seq == 0]
    assert len(lost) == 1 and [heads[t].anchored_seq for t in seqs if t not in lost] == [
        seqs[t] for t in seqs if t not in lost]
    tid = lost[0]
    # The checkpoint is in the bucket, its write claimed at the moment it was signed and
    # never recorded: what a crash between the put and the record leaves.
    assert world.files(f"tenants/{tid}") == [_name(seqs[tid])]
    assert (heads[tid].anchor_attempted_at, heads[tid].anchored_at) == (at(0), None)
    assert world.settle(tid) is True
    head = world.head(tid)
    assert (head.anchored_seq, head.anchored_at, head.anchor_problem,
            head.anchor_config_id) == (seqs[tid], at(0), None, world.config(tid))
    assert world.settle(tid) is False  # recorded now
    assert world.check(tid).ok is True


def test_a_bucket_that_refuses_the_write_is_recorded_as_the_problem(world: World) -> None:
    seq = world.append(2)
    world.plane.faults["put:audit/checkpoints/0"] = down
    assert world.anchor(at(0)) is False
    head = world.head()
    assert (head.anchored_seq, head.anchored_at, head.anchor_attempted_at,
            head.anchor_problem) == (0, None, at(0), "unreachable")
    assert world.files() == []
    del world.plane.faults["put:audit/checkpoints/0"]
    assert world.anchor(at(1)) is True
    assert (world.head().anchored_seq, world.head().anchor_problem) == (seq, None)


def test_a_checkpoint_another_sealer_wrote_first_is_taken_as_written(world: World) -> None:
    seq = world.append(2)
    assert world.anchor(at(0)) is True
    world.set_head(anchored_seq=0, anchored_at=None)  # the record of it lost
    assert world.anchor(at(5)) is True  # the same head: the object exists, kept as it is
    assert world.body(seq)["created_at"] == at(0).isoformat()
    assert (world.head().anchored_seq, world.head().anchored_at) == (seq, at(5))


def test_a_sealer_that_finds_its_head_recorded_meanwhile_leaves_that_record(world: World
                                                                           ) -> None:
    seq = world.append(2)
    racing: list[bool] = []

    def another_sealer_first(_path: str) -> None:
        if not racing:
            racing.append(True)
            assert world.anchor(at(7)) is True  # claims the same head, writes, records

    world.plane.faults["put:audit/checkpoints/0"] = another_sealer_first
    assert world.anchor(at(0)) is True
    assert racing == [True]
    head = world.head()
    assert (head.anchored_seq, head.anchored_at, head.anchor_attempted_at) == (
        seq, at(7), at(7))
    assert world.body(seq)["created_at"] == at(7).isoformat()


@pytest.mark.parametrize("name", ["audit_checkpoint_seconds", "audit_tlog_checkpoint_seconds"])
def test_a_checkpoint_interval_over_a_year_is_refused_at_start(tmp_path: Path,
                                                              name: str) -> None:
    """A longer one made "now minus the interval" fall before the year 1: the tree's
    checkpoints failed every round (logged only), the chain's raised out of the sealer."""
    from pydantic import ValidationError

    from control_plane.settings import Settings

    assert getattr(Settings(data_dir=tmp_path, **{name: 365 * 24 * 3600}), name) == 31536000
    with pytest.raises(ValidationError) as refused:
        Settings(data_dir=tmp_path, **{name: 1e12})
    [error] = refused.value.errors()
    assert (error["loc"], error["type"]) == ((name,), "less_than_equal")
