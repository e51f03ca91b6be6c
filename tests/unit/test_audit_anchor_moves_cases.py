"""A move of the anchor as ``anchor_moves.checkpoint_move`` writes it: the ``audit_anchor_moved``
row (recorded once per move, sealed), the tree's checkpoint of it with the consistency proof
from the last one, written into the place the anchor leaves (the root when that place refuses
the write), the row's inclusion proof returned for the move record, and the tree's size
recorded. Exact outcomes on an embedded database and a local bucket
(``checkpoint_world.py``), no server."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.audit import anchor_moves, anchors, leaves, tlog_anchor, tree
from control_plane.audit import service as audit
from control_plane.audit.anchors import Place
from control_plane.audit.notes import signed_checkpoint
from control_plane.db.base import utcnow
from control_plane.db.models import AccessLog
from control_plane.kit import request_id_var
from control_plane.plane.data_plane import Target
from control_plane.tlog import merkle
from tests.unit.checkpoint_world import World, down, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _place(world: World, name: str) -> Place:
    return Place("default", None, None, f"tenants/{world.tenant}/{name}")


def _target(world: World, place: Place) -> Target:
    with world.sessions() as session:
        return anchors.target_of(session, world.plane, place, None)


def _move(world: World, since: int, to: Place, *, old: str = "old", to_id: uuid.UUID | None = None,
          seal: Any = audit.seal) -> tuple[dict[str, Any], Target, Target, Target]:
    old_target = _target(world, _place(world, old))
    root = _target(world, anchors.root_of(world.tenant))
    with world.sessions() as session:
        proof, used = anchor_moves.checkpoint_move(session, world.settings, seal, world.tenant,
                                                   since, to, to_id, old_target, root)
    return proof, used, old_target, root


def _tlog(world: World, prefix: str | None = None) -> list[str]:
    folder = world.folder(prefix) / "tlog"
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) \
        if folder.exists() else []


def _moves(world: World) -> list[AccessLog]:
    with world.sessions() as session:
        rows = list(session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant, AccessLog.operation == "audit_anchor_moved")
            .order_by(AccessLog.id)))
        for row in rows:
            session.expunge(row)
        return rows


def _cp(size: int) -> str:
    return f"checkpoint/{size:020d}"


def _recording(world: World) -> list[str]:
    puts: list[str] = []
    world.plane.faults["put:/tlog/"] = puts.append
    return puts


def test_a_move_is_a_sealed_row_checkpointed_in_the_place_it_leaves(world: World) -> None:
    last = world.append(3)
    to = Place("s3", "b", None, "p")  # the new place is not opened here
    token = request_id_var.set("req-move")
    before = utcnow()
    try:
        proof, used, old, root = _move(world, last, to, to_id=uuid.UUID(int=6))
    finally:
        request_id_var.reset(token)
    (row,) = _moves(world)
    assert (row.seq, row.accessor_type, row.accessor_id, row.success, row.detail,
            row.request_id, row.tenant_id) == (
        last + 1, "system", "audit-anchor", True,
        f"audit checkpoints move to storage configuration sc_{uuid.UUID(int=6).hex}",
        "req-move", world.tenant)
    assert before - timedelta(seconds=1) <= row.accessed_at.replace(tzinfo=before.tzinfo) \
        <= utcnow()
    size = last + 1
    with world.sessions() as session:
        _, head = tree.head(session, world.tenant, size)
        hashes = tree.inclusion(session, world.tenant, size, size)
    assert proof == {"size": size, "seq": size,
                     "leaf": base64.b64encode(leaves.leaf_bytes(row)).decode(),
                     "hashes": [base64.b64encode(h).decode() for h in hashes]}
    assert merkle.verify_inclusion(merkle.leaf_hash(leaves.leaf_bytes(row)), size - 1, size,
                                   hashes, head)
    assert used is old
    assert _tlog(world, old.prefix) == [_cp(size)]  # the first checkpoint: no proof before it
    assert (world.folder(old.prefix) / "tlog" / _cp(size)).read_text() == signed_checkpoint(
        world.settings, world.tenant, size, head)
    assert _tlog(world) == [] and _tlog(world, f"tenants/{world.tenant}/new") == []
    assert (world.head().tlog_size, world.head().last_seq) == (size, size)

    # A retried move finds its row sealed and the checkpoint written: nothing new.
    again, used, old, _ = _move(world, last, to, to_id=uuid.UUID(int=6))
    assert (again, used is old, len(_moves(world))) == (proof, True, 1)
    assert _tlog(world, old.prefix) == [_cp(size)]


def test_the_checkpoint_of_a_move_carries_its_proof_from_the_last_one_first(world: World
                                                                            ) -> None:
    last = world.append(3)
    with world.sessions() as session:
        assert tlog_anchor.publish(session, world.plane, world.settings, world.tenant) is True
    puts = _recording(world)
    proof, used, old, _ = _move(world, last, _place(world, "new"))
    size = last + 1
    first = f"consistency/{last:020d}-{size:020d}"
    assert puts == [f"{old.prefix}/audit/checkpoints/tlog/{first}",
                    f"{old.prefix}/audit/checkpoints/tlog/{_cp(size)}"]
    assert _tlog(world, old.prefix) == [_cp(size), first]
    with world.sessions() as session:
        hashes = tree.consistency(session, world.tenant, last, size)
        _, old_root = tree.head(session, world.tenant, last)
        _, new_root = tree.head(session, world.tenant, size)
    assert (world.folder(old.prefix) / "tlog" / first).read_bytes() == (
        tlog_anchor.consistency_body(last, size, hashes))
    assert json.loads((world.folder(old.prefix) / "tlog" / first).read_bytes())["first"] == last
    assert merkle.verify_consistency(last, size, old_root, new_root, hashes)
    assert (proof["size"], proof["seq"], world.head().tlog_size) == (size, size, size)


def test_a_move_row_is_reused_only_when_sealed_after_the_last_checkpoint(world: World) -> None:
    last = world.append(2)
    to = _place(world, "new")
    _move(world, last, to)
    _move(world, last + 1, to)  # the first row is checkpointed: this is another move
    assert [r.seq for r in _moves(world)] == [last + 1, last + 2]
    _move(world, last + 1, to)
    _move(world, last, _place(world, "other"))  # another destination
    assert [r.seq for r in _moves(world)] == [last + 1, last + 2, last + 3]
    assert _moves(world)[2].detail == (
        f"audit checkpoints move to the operator's default bucket at "
        f"'tenants/{world.tenant}/other'")


def test_a_move_row_the_sealer_left_unsealed_is_an_error(world: World) -> None:
    last = world.append(2)
    with pytest.raises(RuntimeError, match="the anchor's move row was not sealed"):
        _move(world, last, _place(world, "new"), seal=lambda session, tenant: 0)
    (row,) = _moves(world)
    assert row.seq is None and _tlog(world, f"tenants/{world.tenant}/old") == []


def test_a_move_out_of_a_place_that_refuses_the_write_is_checkpointed_in_the_root(
        world: World) -> None:
    last = world.append(3)
    with world.sessions() as session:
        assert tlog_anchor.publish(session, world.plane, world.settings, world.tenant) is True
    old_prefix = f"tenants/{world.tenant}/old/"
    puts: list[str] = []

    def refuse_old(path: str) -> None:
        puts.append(path)
        if path.startswith(old_prefix):
            down(path)

    world.plane.faults["put:/tlog/"] = refuse_old
    proof, used, old, root = _move(world, last, _place(world, "new"))
    size = last + 1
    first = f"consistency/{last:020d}-{size:020d}"
    assert used is root
    assert puts == [f"{old_prefix}audit/checkpoints/tlog/{first}",
                    f"tenants/{world.tenant}/audit/checkpoints/tlog/{first}",
                    f"tenants/{world.tenant}/audit/checkpoints/tlog/{_cp(size)}"]
    assert _tlog(world) == [_cp(last), _cp(size), first]
    assert _tlog(world, old.prefix) == []
    assert world.head().tlog_size == size


def test_objects_another_sealer_wrote_first_are_taken_as_written(world: World) -> None:
    last = world.append(3)
    with world.sessions() as session:
        assert tlog_anchor.publish(session, world.plane, world.settings, world.tenant) is True
        size = last + 1
    old = _target(world, _place(world, "old"))
    first = f"consistency/{last:020d}-{size:020d}"
    (world.folder(old.prefix) / "tlog" / "consistency").mkdir(parents=True)
    (world.folder(old.prefix) / "tlog" / first).write_bytes(b"theirs")
    proof, used, old, root = _move(world, last, _place(world, "new"))
    assert used is old and proof["size"] == size
    assert _tlog(world, old.prefix) == [_cp(size), first]
    assert (world.folder(old.prefix) / "tlog" / first).read_bytes() == b"theirs"
    assert _tlog(world) == [_cp(last)]


def test_a_larger_size_recorded_meanwhile_is_not_set_back(world: World) -> None:
    last = world.append(3)

    def another_publisher(_path: str) -> None:
        world.set_head(tlog_size=last + 9)

    world.plane.faults["put:/tlog/checkpoint/"] = another_publisher
    _move(world, last, _place(world, "new"))
    assert world.head().tlog_size == last + 9


def test_a_move_after_a_checkpoint_of_one_row_is_proven_from_it(world: World) -> None:
    world.append(1)
    with world.sessions() as session:
        assert tlog_anchor.publish(session, world.plane, world.settings, world.tenant) is True
    _, _, old, _ = _move(world, 1, _place(world, "new"))
    assert _tlog(world, old.prefix) == [_cp(2), f"consistency/{1:020d}-{2:020d}"]
