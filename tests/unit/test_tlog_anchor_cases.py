"""The audit tree's signed checkpoints in the tenant's bucket (``control_plane/audit/
tlog_anchor.py``): the object names and bytes, which tenants are due and when (the interval,
a last attempt exactly one interval old), the consistency proof written first, what a failed
write leaves, a write another replica made first, one tenant's failure among others, the
witnesses' hook, and a size recorded meanwhile. Exact outcomes on an embedded database and a
local bucket (``checkpoint_world.py``), no server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

from control_plane.audit import tlog_anchor, tree
from control_plane.audit.notes import signed_checkpoint
from control_plane.db.engine import begin_write
from control_plane.db.models import AuditTile
from control_plane.tlog import merkle
from storage_adapters import base as storage
from tests.unit.checkpoint_world import World, at, down, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _files(world: World, tenant: Any = None) -> list[str]:
    folder = world.bucket / f"tenants/{tenant or world.tenant}" / "audit" / "checkpoints" / "tlog"
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) \
        if folder.exists() else []


def _read(world: World, name: str) -> bytes:
    return (world.folder() / "tlog" / name).read_bytes()


def _publish(world: World, seconds: float, *, interval: bool = True, tenant: Any = None) -> bool:
    now = at(seconds)
    cutoff = at(seconds - world.settings.audit_tlog_checkpoint_seconds) if interval else None
    with world.sessions() as session:
        return tlog_anchor.publish(session, world.plane, world.settings, tenant or world.tenant,
                                   now=now, cutoff=cutoff)


def _due(world: World, seconds: float) -> int:
    with world.sessions() as session:
        return tlog_anchor.publish_due(session, world.plane, world.settings, now=at(seconds))


def _root(world: World, size: int) -> bytes:
    with world.sessions() as session:
        return tree.head(session, world.tenant, size)[1]


def cp(size: int) -> str:
    return f"checkpoint/{size:020d}"


def proof_name(first: int, second: int) -> str:
    return f"consistency/{first:020d}-{second:020d}"


def test_names_and_the_proofs_bytes() -> None:
    assert tlog_anchor.TLOG == ("audit", "checkpoints", "tlog")
    assert tlog_anchor.checkpoint_name(5) == "checkpoint/00000000000000000005"
    assert tlog_anchor.consistency_name(3, 12) == (
        "consistency/00000000000000000003-00000000000000000012")
    assert tlog_anchor.consistency_body(3, 12, [b"\x00" * 32, b"\xff" * 2]) == (
        b'{"first":3,"hashes":["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","//8="],'
        b'"second":12}')


def test_a_checkpoint_is_the_signed_head_of_the_tree_and_its_size_is_recorded(world: World
                                                                             ) -> None:
    size = world.append(3)
    assert _publish(world, 0) is True
    assert _files(world) == [cp(size)]
    assert _read(world, cp(size)).decode() == signed_checkpoint(
        world.settings, world.tenant, size, _root(world, size))
    head = world.head()
    assert (head.tlog_size, head.tlog_attempted_at, head.tree_size) == (size, at(0), size)
    # nothing new: nothing claimed, nothing written
    assert _publish(world, 60) is False
    assert _publish(world, 61, interval=False) is False
    assert (world.head().tlog_attempted_at, _files(world)) == (at(0), [cp(size)])


def test_the_next_checkpoint_has_its_consistency_proof_beside_it(world: World) -> None:
    first = world.append(3)
    assert _publish(world, 0) is True
    second = world.append(5)
    assert _publish(world, 4.5) is False  # within the interval
    assert world.head().tlog_attempted_at == at(0)
    assert _publish(world, 5) is True  # a last attempt exactly one interval old is due
    assert _files(world) == [cp(first), cp(second), proof_name(first, second)]
    with world.sessions() as session:
        hashes = tree.consistency(session, world.tenant, first, second)
    assert _read(world, proof_name(first, second)) == tlog_anchor.consistency_body(
        first, second, hashes)
    assert merkle.verify_consistency(first, second, _root(world, first), _root(world, second),
                                     hashes)
    assert (world.head().tlog_size, world.head().tlog_attempted_at) == (second, at(5))
    # without a cutoff: written whenever the tree grew, however recent the last attempt
    third = world.append(1)
    assert _publish(world, 5.5, interval=False) is True
    assert _files(world)[-1] == proof_name(second, third)


def test_publish_due_writes_each_due_tenant_once_an_interval(world: World) -> None:
    others = [world.new_tenant(), world.new_tenant()]
    idle = world.new_tenant()  # no rows: never due
    for tenant in [world.tenant, *others]:
        world.append(2, tenant)
    assert _due(world, 0) == 3
    assert _files(world, idle) == []
    world.append(1)
    world.append(1, others[0])
    assert _due(world, 4) == 0
    assert [world.head(t).tlog_attempted_at for t in (world.tenant, *others)] == [at(0)] * 3
    assert _due(world, 5) == 2
    assert [world.head(t).tlog_size for t in (world.tenant, *others, idle)] == [3, 3, 2, 0]
    assert [world.head(t).tlog_attempted_at for t in (world.tenant, *others)] == [
        at(5), at(5), at(0)]
    assert _due(world, 100) == 0


def test_one_tenants_failure_does_not_stop_the_others(world: World,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    broken = world.new_tenant()
    world.append(2, broken)
    world.append(2)
    with world.sessions() as session:
        begin_write(session)
        session.execute(delete(AuditTile).where(AuditTile.tenant_id == broken))
        session.commit()
    with caplog.at_level(logging.WARNING, logger=tlog_anchor.__name__):
        assert _due(world, 0) == 1
    assert _files(world) == [cp(2)] and _files(world, broken) == []
    assert [r.getMessage() for r in caplog.records] == [
        f"audit tlog checkpoint for tenant {broken} failed: TreeError"]


def test_a_bucket_that_refuses_a_write_is_retried_the_proof_first(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    first = world.append(2)
    assert _publish(world, 0) is True
    second = world.append(2)
    world.plane.faults["put:/tlog/consistency/"] = down
    with caplog.at_level(logging.WARNING, logger=tlog_anchor.__name__):
        assert _publish(world, 10) is False
    assert [r.getMessage() for r in caplog.records] == [
        f"audit tlog checkpoint of tenant {world.tenant} at size {second} not written: "
        "StorageUnavailable"]
    assert _files(world) == [cp(first)]
    assert (world.head().tlog_size, world.head().tlog_attempted_at) == (first, at(10))
    del world.plane.faults["put:/tlog/consistency/"]
    assert _publish(world, 12) is False  # the failed attempt waits its interval
    assert _publish(world, 15) is True
    assert _files(world) == [cp(first), cp(second), proof_name(first, second)]


def test_a_checkpoint_another_replica_wrote_first_counts_as_written(world: World) -> None:
    size = world.append(2)
    folder = world.folder() / "tlog" / "checkpoint"
    folder.mkdir(parents=True)
    (folder / f"{size:020d}").write_bytes(b"theirs")
    assert _publish(world, 0) is True
    assert (_read(world, cp(size)), world.head().tlog_size) == (b"theirs", size)


def test_a_larger_size_recorded_meanwhile_is_not_set_back(world: World) -> None:
    size = world.append(2)
    world.plane.faults["put:/tlog/checkpoint/"] = lambda _p: world.set_head(tlog_size=size + 7)
    assert _publish(world, 0) is True
    assert world.head().tlog_size == size + 7


def test_the_checkpoint_goes_where_the_log_is_anchored(world: World) -> None:
    moved = world.move_to()
    world.set_head(anchor_config_id=moved)
    size = world.append(2)
    assert _publish(world, 0) is True
    assert _files(world) == []
    assert sorted(p.name for p in (world.folder(f"tenants/{world.tenant}/moved") / "tlog"
                                   / "checkpoint").iterdir()) == [f"{size:020d}"]


class Witnesses:
    """Stands in for ``witnesses.cosign_and_store``: records each call, or fails."""

    def __init__(self, world: World, fail: bool = False) -> None:
        self.world, self.fail = world, fail
        self.calls: list[tuple[Any, ...]] = []
        self.proved: list[list[bytes]] = []
        self.open: list[bool] = []

    def __call__(self, session: Any, settings: Any, target: Any, tenant_id: Any, signed: str,
                 previous: int, proof: list[bytes], *, prove: Any) -> None:
        self.calls.append((settings is self.world.settings, target.prefix, tenant_id, signed,
                           previous, proof))
        self.proved.append(prove(1, previous or 2))
        self.open.append(session.in_transaction())
        if self.fail:
            raise storage.StorageUnavailable("a witness's bucket write")


def test_each_checkpoint_written_goes_to_the_witnesses_with_its_proof(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Witnesses(world)
    monkeypatch.setattr(tlog_anchor.witnesses, "cosign_and_store", spy)
    first = world.append(2)
    assert _publish(world, 0) is True
    second = world.append(3)
    assert _publish(world, 10) is True
    prefix = f"tenants/{world.tenant}"
    with world.sessions() as session:
        hashes = tree.consistency(session, world.tenant, first, second)
        assert spy.proved == [tree.consistency(session, world.tenant, 1, 2),
                              tree.consistency(session, world.tenant, 1, first)]
    assert spy.calls == [
        (True, prefix, world.tenant, _read(world, cp(first)).decode(), 0, []),
        (True, prefix, world.tenant, _read(world, cp(second)).decode(), first, hashes)]
    assert spy.open == [False, False]


def test_a_witness_hook_that_fails_leaves_the_checkpoint_recorded(
        world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tlog_anchor.witnesses, "cosign_and_store", Witnesses(world, fail=True))
    size = world.append(2)
    with caplog.at_level(logging.WARNING, logger=tlog_anchor.__name__):
        assert _publish(world, 0) is True
    assert world.head().tlog_size == size and _files(world) == [cp(size)]
    assert [r.getMessage() for r in caplog.records] == [
        f"audit checkpoint of tenant {world.tenant} not cosigned: StorageUnavailable"]
