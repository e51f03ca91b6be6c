"""The audit anchor cannot be moved by whoever can write the database (issue 42, point 5).

The reported attack: rewrite a row, recompute the chain, insert an active credential-less
``default`` configuration and set ``anchored_seq`` to 0 — and ``memplane audit verify``
printed ``ok: true, checkpoints_checked: 0``, because it read only the bucket the database
named. Now every tenant's list of anchors starts at the operator's default bucket at its own
prefix, each move of the anchor is signed into the old bucket, and verify reads every place
the tenant anchored to (``control_plane/audit/anchors.py``).
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update
from typer.testing import CliRunner

from control_plane.audit import checkpoints
from control_plane.audit import service as audit
from control_plane.db.base import new_id, utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import AuditHead, StorageConfig
from control_plane.runtime import Runtime
from memplane.cli import app
from tests.security.test_audit_anchor import (
    _anchor,
    _append,
    _folder,
    _rewrite,
    _three_checkpoints,
    quiet_stack,
    quiet_tenant,
    quiet_world,
    s3_through_proxy,
)
from tests.support.emulators import MotoServer, new_s3_bucket
from tests.support.process import TcpProxy
from tests.support.service import ServiceWorld, Tenant

# Fixtures shared with the module next door.
__all__ = ["quiet_stack", "quiet_tenant", "quiet_world", "s3_through_proxy"]


def _set_head(runtime: Runtime, tenant_id: uuid.UUID, **values: Any) -> None:
    with runtime.sessions() as session:
        begin_write(session)
        session.execute(update(AuditHead).where(AuditHead.tenant_id == tenant_id)
                        .values(**values))
        session.commit()


def _point_anchor_elsewhere(runtime: Runtime, tenant_id: uuid.UUID, *,
                            repoint_old: bool = False) -> uuid.UUID:
    """The attack's database edits: retire the tenant's storage and insert an active
    credential-less ``default`` configuration at an empty prefix (or, so that no row names
    the old place at all, rewrite the old row to that prefix), and make the head say nothing
    was anchored yet."""
    elsewhere = f"tenants/{tenant_id}/elsewhere"
    with runtime.sessions() as session:
        begin_write(session)
        if repoint_old:
            fake = session.scalars(select(StorageConfig.id).where(
                StorageConfig.tenant_id == tenant_id)).one()
            session.execute(update(StorageConfig).where(StorageConfig.id == fake)
                            .values(prefix=elsewhere))
        else:
            fake = new_id()
            session.execute(update(StorageConfig).where(StorageConfig.tenant_id == tenant_id)
                            .values(is_active=False, retired_at=utcnow()))
            session.add(StorageConfig(id=fake, tenant_id=tenant_id, storage_type="default",
                                      prefix=elsewhere, connection_config={},
                                      is_active=True, created_at=utcnow()))
        session.commit()
    _set_head(runtime, tenant_id, anchored_seq=0, anchor_config_id=fake)
    runtime.plane.forget_tenant(tenant_id)  # as any replica does within seconds
    runtime.plane.close()  # a replica that never saw the old row: nothing cached
    return fake


def _chain_alone_verifies(runtime: Runtime, tenant_id: uuid.UUID) -> None:
    with runtime.sessions() as session:
        assert audit.verify(session, tenant_id).ok is True


@pytest.mark.parametrize(("rewritten", "repoint_old"), [
    (True, False), (True, True), (False, False)],
    ids=["rewritten", "rewritten-old-config-repointed", "only-moved"])
def test_the_reported_attack_fails_verify(quiet_tenant: Tenant, rewritten: bool,
                                          repoint_old: bool) -> None:
    runtime, tid = quiet_tenant.stack.runtime, quiet_tenant.id
    anchored = _three_checkpoints(quiet_tenant)
    if rewritten:
        _rewrite(runtime, tid, 2)  # the server's own hashing, every later link and the head
    _point_anchor_elsewhere(runtime, tid, repoint_old=repoint_old)
    _chain_alone_verifies(runtime, tid)

    with quiet_tenant.client() as client:
        result = client.audit.verify()
    assert result.ok is False
    assert result.anchors_checked == 2  # the tenant's start and the database's configuration
    if rewritten:
        assert (result.first_bad_checkpoint, result.first_bad_seq,
                result.checkpoints_checked) == (anchored[0], 1, 1)
        assert result.problem is not None and result.problem.startswith(
            f"row {anchored[0]} in the database is not the row checkpoint {anchored[0]} "
            "signed at ")
        assert result.problem.endswith(f": rows 1 to {anchored[0]} were rewritten after it")
    else:
        assert (result.first_bad_checkpoint, result.first_bad_seq,
                result.checkpoints_checked) == (anchored[2], 1, 3)
        assert result.problem == (
            f"the operator's default bucket at 'tenants/{tid}' holds signed checkpoint "
            f"{anchored[2]}, but the database records checkpoints only up to row 0: its "
            "record of the anchor was set back")

    # The officer's command: exit 1, the same answer.
    outcome = CliRunner().invoke(app, ["audit", "verify"], env={
        "MEMPLANE_URL": quiet_tenant.stack.base_url,
        "MEMPLANE_API_KEY": quiet_tenant.key("compliance")})
    assert outcome.exit_code == 1
    printed = json.loads(outcome.output.strip().splitlines()[-1])
    assert (printed["ok"], printed["problem"]) == (False, result.problem)


@pytest.mark.parametrize(("to", "looks_in_flight"), [
    ("zero", False), ("first checkpoint", False), ("zero", True)])
def test_lowering_anchored_seq_alone_is_caught(quiet_tenant: Tenant, to: str,
                                               looks_in_flight: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    runtime, tid = quiet_tenant.stack.runtime, quiet_tenant.id
    anchored = _three_checkpoints(quiet_tenant)
    lowered = 0 if to == "zero" else anchored[0]
    _set_head(runtime, tid, anchored_seq=lowered)
    if looks_in_flight:
        # Also clearing anchored_at makes the last write look unfinished: verify waits for
        # it to be recorded (briefly here), then answers the same.
        monkeypatch.setattr(checkpoints, "IN_FLIGHT_SECONDS", 0.3)
        _set_head(runtime, tid, anchored_at=None)
    with quiet_tenant.client() as client:
        result = client.audit.verify()
    assert (result.ok, result.first_bad_checkpoint, result.first_bad_seq) == (
        False, anchored[2], lowered + 1)
    assert result.problem == (
        f"the operator's default bucket at 'tenants/{tid}' holds signed checkpoint "
        f"{anchored[2]}, but the database records checkpoints only up to row {lowered}: its "
        "record of the anchor was set back")


def test_anchoring_into_a_place_the_database_chose_without_a_move_is_caught(
        quiet_tenant: Tenant) -> None:
    """The attacker leaves ``anchored_seq`` alone but names the inserted configuration as
    the last anchor, so the sealer writes there without recording a move."""
    runtime, tid = quiet_tenant.stack.runtime, quiet_tenant.id
    anchored = _three_checkpoints(quiet_tenant)
    fake = _point_anchor_elsewhere(runtime, tid)
    _set_head(runtime, tid, anchored_seq=anchored[2])
    moved = _anchor(runtime, tid)
    assert (runtime.settings.data_dir / "bucket" / "tenants" / str(tid) / "elsewhere" /
            "audit" / "checkpoints" / f"{moved:020d}.json").exists()
    with quiet_tenant.client() as client:
        result = client.audit.verify()
    assert (result.ok, result.first_bad_checkpoint) == (False, moved)
    assert result.problem == (
        f"checkpoint {moved} in the operator's default bucket at 'tenants/{tid}/elsewhere' "
        f"continues from checkpoint {anchored[2]} in the operator's default bucket at "
        f"'tenants/{tid}', but no signed record of the anchor moving there was found: the "
        "anchor was moved by editing the database")
    assert fake.hex not in result.problem  # places are named by where they are


def test_a_checkpoint_write_in_flight_is_waited_for(quiet_tenant: Tenant) -> None:
    """Verify reading the bucket between the sealer's put and its record of it in the
    database is not an alarm: the database shows the claim at the checkpoint's own time."""
    runtime, tid = quiet_tenant.stack.runtime, quiet_tenant.id
    anchored = _three_checkpoints(quiet_tenant)
    with runtime.sessions() as session:
        head = session.get(AuditHead, tid)
        assert head is not None
        finished = head.anchored_at
    # The state between put and record: claimed now, the previous checkpoint still recorded.
    _set_head(runtime, tid, anchored_seq=anchored[1], anchored_at=utcnow())
    timer = threading.Timer(0.5, _set_head, (runtime, tid),
                            {"anchored_seq": anchored[2], "anchored_at": finished})
    timer.start()
    try:
        with quiet_tenant.client() as client:
            result = client.audit.verify()
    finally:
        timer.join()
    assert (result.ok, result.problem, result.anchored_seq) == (True, None, anchored[1])
    assert result.checkpoints_checked == 3


# -- legitimate moves ------------------------------------------------------------------------


def _configure(world: ServiceWorld, body: dict[str, Any], local_root: Path) -> uuid.UUID:
    from pydantic import TypeAdapter

    from control_plane.storage_config import service as storage_config
    from control_plane.storage_config.schemas import StorageConfigIn

    runtime = world.runtime
    with runtime.sessions() as session:
        storage_config.configure(
            session, runtime.plane, world.actor,
            TypeAdapter(StorageConfigIn).validate_python(body),
            allow_local=True, local_roots=[local_root])
        return runtime.plane.active(session, world.tenant_id).config_id


def _names(runtime: Runtime, config_id: uuid.UUID) -> list[str]:
    with runtime.sessions() as session:
        target = runtime.plane.by_id(session, config_id)
    # The chain's JSON checkpoints; the tree's tlog/ folder beside them is tested elsewhere.
    return sorted(info.path.rsplit("/", 1)[-1]
                  for info in target.adapter.list(target.path("audit", "checkpoints") + "/")
                  if info.path.endswith(".json"))


def _body(runtime: Runtime, config_id: uuid.UUID, name: str) -> dict[str, Any]:
    with runtime.sessions() as session:
        target = runtime.plane.by_id(session, config_id)
    loaded: dict[str, Any] = json.loads(
        target.adapter.get(target.path("audit", "checkpoints", name)))
    return loaded


def _verify(world: ServiceWorld) -> audit.Verification:
    runtime = world.runtime
    with runtime.sessions() as session:
        return audit.verify(session, world.tenant_id, plane=runtime.plane,
                            settings=runtime.settings)


def _moved_twice(world: ServiceWorld, moto_server: MotoServer,
                 tmp_path: Path) -> tuple[list[int], uuid.UUID, uuid.UUID]:
    """Checkpoints in the tenant's start, then in an S3 bucket, then in a local one."""
    runtime, tid = world.runtime, world.tenant_id
    seqs = []
    _append(runtime, tid, 2)
    seqs.append(_anchor(runtime, tid))
    s3 = _configure(world, {"storage_type": "s3",
                            "connection_config": new_s3_bucket(moto_server)}, tmp_path)
    seqs.append(_anchor(runtime, tid))
    _append(runtime, tid, 2)
    seqs.append(_anchor(runtime, tid))
    local = _configure(world, {"storage_type": "local",
                               "connection_config": {"root": str(tmp_path / "own")}}, tmp_path)
    seqs.append(_anchor(runtime, tid))
    return seqs, s3, local


def test_an_admin_moving_the_anchor_still_verifies_and_checks_every_bucket(
        quiet_world: ServiceWorld, moto_server: MotoServer, tmp_path: Path) -> None:
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    seqs, s3, local = _moved_twice(quiet_world, moto_server, tmp_path)

    result = _verify(quiet_world)
    assert (result.ok, result.problem) == (True, None)
    assert (result.checkpoints_checked, result.first_checkpoint_seq,
            result.last_checkpoint_seq, result.anchored_seq) == (4, seqs[0], seqs[3], seqs[3])
    assert (result.anchors_checked, result.anchor_moves, result.anchors_unreadable) == (
        3, 2, ())

    # Each old bucket holds the signed move next to its own checkpoints; the new one's first
    # checkpoint names where the anchor came from.
    assert sorted(p.name for p in _folder(runtime, tid).iterdir() if p.is_file()) == [
        f"{seqs[0]:020d}.json", f"{seqs[1]:020d}-moved.json"]
    assert _names(runtime, s3) == [f"{seqs[1]:020d}.json", f"{seqs[2]:020d}.json",
                                   f"{seqs[3]:020d}-moved.json"]
    assert _names(runtime, local) == [f"{seqs[3]:020d}.json"]
    move = json.loads((_folder(runtime, tid) / f"{seqs[1]:020d}-moved.json").read_bytes())
    arrival = _body(runtime, s3, f"{seqs[1]:020d}.json")
    assert move["moved_to"] == arrival["anchor"]
    assert (move["moved_to"]["storage_config_id"], move["moved_to"]["storage_type"]) == (
        f"sc_{s3.hex}", "s3")
    assert arrival["moved_from"] == move["anchor"]
    assert move["anchor"]["prefix"] == f"tenants/{tid}"
    assert (move["seq"], move["row_hash"], move["prev_seq"]) == (
        arrival["seq"], arrival["row_hash"], seqs[0])

    # The S3 bucket is no longer the anchor, and still checked: a row only its checkpoints
    # cover, rewritten with the chain, is caught there.
    _rewrite(runtime, tid, seqs[1] + 1)
    caught = _verify(quiet_world)
    assert (caught.ok, caught.first_bad_checkpoint, caught.first_bad_seq) == (
        False, seqs[2], seqs[1] + 1)


@pytest.mark.parametrize("edit", ["deleted", "pointed elsewhere"])
def test_removing_or_editing_an_old_configuration_does_not_hide_its_bucket(
        quiet_world: ServiceWorld, moto_server: MotoServer, tmp_path: Path,
        edit: str) -> None:
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    seqs, s3, _local = _moved_twice(quiet_world, moto_server, tmp_path)
    _rewrite(runtime, tid, seqs[1] + 1)
    with runtime.sessions() as session:
        begin_write(session)
        if edit == "deleted":
            session.execute(delete(StorageConfig).where(StorageConfig.id == s3))
        else:
            session.execute(update(StorageConfig).where(StorageConfig.id == s3)
                            .values(bucket="an-empty-bucket"))
        session.commit()
    result = _verify(quiet_world)
    assert (result.ok, result.first_bad_checkpoint) == (False, seqs[1])
    why = ("a storage configuration the database no longer has: configurations were removed"
           if edit == "deleted" else "but the database's configuration no longer names that "
           "bucket: the configuration was changed")
    assert result.problem == (
        f"checkpoint {seqs[1]} in the operator's default bucket at 'tenants/{tid}' records "
        f"that the anchor moved to storage configuration sc_{s3.hex}, {why}")


@pytest.mark.parametrize("how", ["unreachable", "credentials unreadable"])
def test_a_move_out_of_a_bucket_that_no_longer_takes_writes_is_recorded_at_the_start(
        quiet_world: ServiceWorld, s3_through_proxy: tuple[TcpProxy, dict[str, Any]],
        tmp_path: Path, how: str) -> None:
    """A tenant leaving a bucket the server can no longer write must still be able to move:
    the move record goes to the operator's bucket at the tenant's prefix, where every walk
    starts. Verification needs the old bucket readable again to check its checkpoints."""
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    proxy, config = s3_through_proxy
    s3 = _configure(quiet_world, {"storage_type": "s3", "connection_config": config},
                    tmp_path)
    in_s3 = _anchor(runtime, tid)
    sealed: bytes | None = None
    if how == "unreachable":
        proxy.cut()
    else:
        with runtime.sessions() as session:
            begin_write(session)
            row = session.get(StorageConfig, s3)
            assert row is not None and row.credentials_encrypted is not None
            sealed, row.credentials_encrypted = row.credentials_encrypted, b"\0" * 64
            session.commit()
        runtime.plane.close()  # as a server started since would see it
    local = _configure(quiet_world, {"storage_type": "local",
                                     "connection_config": {"root": str(tmp_path / "own")}},
                       tmp_path)
    moved = _anchor(runtime, tid)
    assert sorted(p.name for p in _folder(runtime, tid).iterdir() if p.is_file()) == [
        f"{in_s3:020d}-moved.json", f"{moved:020d}-moved.json"]
    assert _names(runtime, local) == [f"{moved:020d}.json"]

    during = _verify(quiet_world)
    assert (during.ok, during.checkpoints_checked) == (False, 0)
    code = "unreachable" if how == "unreachable" else "storage_misconfigured"
    assert during.problem == (f"the checkpoints in storage configuration sc_{s3.hex} could "
                              f"not be read ({code}); retry when the bucket is reachable")

    if how == "unreachable":
        proxy.restore()
    else:
        with runtime.sessions() as session:
            begin_write(session)
            row = session.get(StorageConfig, s3)
            assert row is not None
            row.credentials_encrypted = sealed
            session.commit()
        runtime.plane.close()
    after = _verify(quiet_world)
    assert (after.ok, after.problem, after.checkpoints_checked) == (True, None, 2)
    assert (after.anchors_checked, after.anchor_moves) == (3, 2)
