"""The audit chain anchored in the tenant's bucket (issue 10, point 5).

Whoever controls the database can rewrite audit rows and recompute every hash and the head,
and the hash chain alone still verifies. The sealer therefore signs each tenant's head into
the tenant's own bucket (``audit/checkpoints/<seq>.json``); ``verify`` holds the database to
those checkpoints and names the first one that disagrees, is forged or is missing.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import delete, select
from typer.testing import CliRunner

from control_plane.audit import checkpoints
from control_plane.audit import service as audit
from control_plane.db.base import utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditHead
from control_plane.identity import Actor
from control_plane.runtime import Runtime
from control_plane.signing import canonical, signing_key
from memplane._receipts import verify_checkpoint, verify_receipt
from memplane.cli import app
from tests.support.clock import wait_until
from tests.support.emulators import MotoServer, new_s3_bucket
from tests.support.process import TcpProxy
from tests.support.service import (
    ServerThread,
    ServiceWorld,
    Stack,
    Tenant,
    isolated_database,
    make_settings,
)

# -- helpers ---------------------------------------------------------------------------------


def _append(runtime: Runtime, tenant_id: uuid.UUID, n: int) -> int:
    """Add ``n`` audit rows and seal them; returns the head's seq."""
    actor = Actor(tenant_id, "api", "anchor-test")
    with runtime.sessions() as session:
        begin_write(session)
        for i in range(n):
            audit.record(session, actor, "write", detail=f"row {i}")
        session.commit()
        audit.seal(session, tenant_id)
        return _head(runtime, tenant_id).last_seq


def _head(runtime: Runtime, tenant_id: uuid.UUID) -> AuditHead:
    with runtime.sessions() as session:
        head = session.get(AuditHead, tenant_id)
        assert head is not None
        session.expunge(head)
        return head


def _anchor(runtime: Runtime, tenant_id: uuid.UUID) -> int:
    """Seal what is pending and anchor the head now; returns the checkpoint's seq."""
    with runtime.sessions() as session:
        audit.seal(session, tenant_id)
        assert checkpoints.anchor(session, runtime.plane, runtime.settings, tenant_id,
                                  seal=audit.seal) is True
    return _head(runtime, tenant_id).anchored_seq


def _folder(runtime: Runtime, tenant_id: uuid.UUID) -> Path:
    return runtime.settings.data_dir / "bucket" / "tenants" / str(tenant_id) / "audit" / \
        "checkpoints"


def _files(runtime: Runtime, tenant_id: uuid.UUID) -> list[str]:
    folder = _folder(runtime, tenant_id)
    # The chain's JSON checkpoints; the tree's tlog/ folder beside them is tested elsewhere.
    return sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.exists() else []


def _rewrite(runtime: Runtime, tenant_id: uuid.UUID, seq: int) -> None:
    """What an operator with database access can do: change one sealed row, then recompute
    every later link and the head, so the chain is consistent again."""
    with runtime.sessions() as session:
        begin_write(session)
        head = session.scalar(select(AuditHead).where(AuditHead.tenant_id == tenant_id)
                              .with_for_update())
        assert head is not None
        rows = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == tenant_id, AccessLog.seq >= seq).order_by(AccessLog.seq)).all()
        rows[0].detail = "nothing happened"
        prev = rows[0].prev_hash
        assert prev is not None
        for row in rows:
            row.prev_hash, row.row_hash = prev, audit.chain_hash(prev, row)
            prev = row.row_hash
        head.last_hash = prev
        session.commit()


def _truncate(runtime: Runtime, tenant_id: uuid.UUID, seq: int) -> None:
    """Remove every row from ``seq`` on and move the head back to the row before."""
    with runtime.sessions() as session:
        begin_write(session)
        head = session.scalar(select(AuditHead).where(AuditHead.tenant_id == tenant_id)
                              .with_for_update())
        assert head is not None
        session.execute(delete(AccessLog).where(AccessLog.tenant_id == tenant_id,
                                                AccessLog.seq >= seq))
        last = session.scalar(select(AccessLog.row_hash).where(
            AccessLog.tenant_id == tenant_id, AccessLog.seq == seq - 1))
        assert last is not None
        head.last_seq, head.last_hash = seq - 1, last
        session.commit()


@pytest.fixture(scope="module")
def quiet_stack(database: str, request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server without a background sealer, on a database of its own: the test decides
    when rows are sealed and when the head is anchored, so every checkpoint's position is
    known. (Another server's sealer on a shared database would anchor these tenants too,
    into its own default bucket.)"""
    url = isolated_database(database, request)
    settings = make_settings(url, tmp_path_factory.mktemp("anchor"), run_background=False)
    server = ServerThread(settings).start()
    try:
        yield Stack(f"http://127.0.0.1:{server.port}", settings, server.app.state.runtime)
    finally:
        server.stop()


@pytest.fixture
def quiet_tenant(quiet_stack: Stack) -> Tenant:
    return quiet_stack.new_tenant()


@pytest.fixture
def quiet_world(quiet_stack: Stack) -> ServiceWorld:
    from control_plane.tenants.service import create_tenant

    with quiet_stack.runtime.sessions() as session:
        created, _ = create_tenant(session, f"t-{uuid.uuid4().hex[:8]}")
    return ServiceWorld(quiet_stack.runtime, created.id)


def _write(tenant: Tenant, n: int) -> None:
    with tenant.client() as client:
        for i in range(n):
            client.memory.set(scope="agent", scope_ref="bot", key=f"k{uuid.uuid4().hex[:6]}",
                              value=i)


def _three_checkpoints(tenant: Tenant) -> list[int]:
    runtime = tenant.stack.runtime
    anchored = []
    for _ in range(3):
        _write(tenant, 2)
        anchored.append(_anchor(runtime, tenant.id))
    _write(tenant, 2)  # and a tail after the last checkpoint
    with runtime.sessions() as session:
        audit.seal(session, tenant.id)
    return anchored


# -- writing ---------------------------------------------------------------------------------


def test_the_sealer_signs_the_head_into_the_bucket_at_least_every_interval(
        quiet_world: ServiceWorld) -> None:
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    assert runtime.settings.audit_checkpoint_seconds == 60
    t0 = utcnow()

    def due(seconds: float) -> None:
        with runtime.sessions() as session:
            checkpoints.anchor_due(session, runtime.plane, runtime.settings,
                                   now=t0 + timedelta(seconds=seconds))

    first = _append(runtime, tid, 3)
    due(0)
    assert _files(runtime, tid) == [f"{first:020d}.json"]
    second = _append(runtime, tid, 2)
    due(30)  # rows arrived, but the interval has not passed
    assert _files(runtime, tid) == [f"{first:020d}.json"]
    due(60)
    assert _files(runtime, tid) == [f"{first:020d}.json", f"{second:020d}.json"]
    due(200)  # no new rows: an idle tenant gets no checkpoints
    assert _files(runtime, tid) == [f"{first:020d}.json", f"{second:020d}.json"]

    body = json.loads((_folder(runtime, tid) / f"{second:020d}.json").read_bytes())
    with runtime.sessions() as session:
        row_hash = session.scalar(select(AccessLog.row_hash).where(
            AccessLog.tenant_id == tid, AccessLog.seq == second))
    key = signing_key(runtime.settings)
    assert set(body) == {"format", "tenant_id", "seq", "row_hash", "prev_seq", "created_at",
                         "key_id", "signature", "anchor"}
    with runtime.sessions() as session:  # the place it was written for: the tenant's start
        default_id = runtime.plane.active(session, tid).config_id
    assert body["anchor"] == {"storage_config_id": f"sc_{default_id.hex}",
                              "storage_type": "default", "bucket": None, "endpoint": None,
                              "prefix": f"tenants/{tid}"}
    assert (body["format"], body["tenant_id"], body["seq"], body["row_hash"],
            body["prev_seq"], body["key_id"]) == (
        "memplane-audit-checkpoint/1", str(tid), second, row_hash, first, key.key_id)
    assert body["created_at"] == (t0 + timedelta(seconds=60)).isoformat()
    assert verify_checkpoint(body, key.public_pem()) is True
    # Same key as receipts, but a checkpoint never passes for a receipt.
    assert verify_receipt(body, key.public_pem()) is False
    head = _head(runtime, tid)
    assert (head.anchored_seq, head.anchor_problem) == (second, None)


def test_the_running_server_anchors_a_new_tenant_on_its_own(tenant: Tenant) -> None:
    folder = tenant.bucket_dir / "audit" / "checkpoints"
    wait_until(lambda: folder.exists() and any(p.is_file() for p in folder.iterdir()),
               "the first checkpoint in the tenant's bucket")
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert len(names) == 1 and names[0].endswith(".json") and len(names[0]) == 25
    first = int(names[0][:20])
    with tenant.client() as client:
        for i in range(3):
            client.memory.set(scope="agent", scope_ref="bot", key=f"k{i}", value=i)
        result = client.audit.verify()
    assert (result.ok, result.checkpoints_checked, result.first_bad_checkpoint) == (True, 1, None)
    assert result.last_checkpoint_seq == first

    # The tenant's very first row, rewritten with every later hash and the head: the chain
    # alone still verifies; the checkpoint the server wrote on its own does not agree.
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        audit.seal(session, tenant.id)
    _rewrite(runtime, tenant.id, 1)
    with runtime.sessions() as session:
        assert audit.verify(session, tenant.id).ok is True
    with tenant.client() as client:
        result = client.audit.verify()
    assert (result.ok, result.first_bad_checkpoint, result.first_bad_seq) == (False, first, 1)


# -- checking --------------------------------------------------------------------------------


def test_a_chain_that_verifies_also_agrees_with_its_checkpoints(quiet_tenant: Tenant) -> None:
    anchored = _three_checkpoints(quiet_tenant)
    with quiet_tenant.client() as client:
        result = client.audit.verify()
    head = _head(quiet_tenant.stack.runtime, quiet_tenant.id)
    assert (result.ok, result.problem, result.first_bad_seq) == (True, None, None)
    assert (result.checkpoints_checked, result.first_checkpoint_seq, result.last_checkpoint_seq,
            result.first_bad_checkpoint) == (3, anchored[0], anchored[2], None)
    assert (result.head_seq, result.anchored_seq) == (head.last_seq, anchored[2])
    assert result.head_seq > result.anchored_seq  # the tail is not anchored yet


@pytest.mark.parametrize("tamper", ["rewrite", "truncate"])
def test_rows_rewritten_with_their_hashes_and_head_fail_verify_naming_the_checkpoint(
        quiet_tenant: Tenant, tamper: str, tmp_path: Path) -> None:
    runtime = quiet_tenant.stack.runtime
    anchored = _three_checkpoints(quiet_tenant)
    target = anchored[0] + 1  # a row after the first checkpoint, covered by the second
    if tamper == "rewrite":
        _rewrite(runtime, quiet_tenant.id, target)
    else:
        _truncate(runtime, quiet_tenant.id, target)
    with runtime.sessions() as session:  # the database alone finds nothing wrong
        assert audit.verify(session, quiet_tenant.id).ok is True

    with quiet_tenant.client() as client:
        result = client.audit.verify()
    assert result.ok is False
    assert result.first_bad_checkpoint == anchored[1]
    assert result.first_bad_seq == anchored[0] + 1  # everything up to checkpoint 1 agreed
    assert result.checkpoints_checked == 2
    if tamper == "rewrite":
        assert result.problem == (
            f"row {anchored[1]} in the database is not the row checkpoint {anchored[1]} signed "
            f"at {_created_at(runtime, quiet_tenant.id, anchored[1])}: rows {anchored[0] + 1} "
            f"to {anchored[1]} were rewritten after it")
    else:
        assert result.problem == (f"the database has no sealed row {anchored[1]}, which "
                                  f"checkpoint {anchored[1]} signed: rows were removed")

    # The officer's command says the same and exits 1.
    officer = quiet_tenant.key("compliance")
    outcome = CliRunner().invoke(app, ["audit", "verify"], env={
        "MEMPLANE_URL": quiet_tenant.stack.base_url, "MEMPLANE_API_KEY": officer})
    assert outcome.exit_code == 1
    printed = json.loads(outcome.output.strip().splitlines()[-1])
    assert (printed["ok"], printed["first_bad_checkpoint"], printed["checkpoints_checked"]) == (
        False, anchored[1], 2)


def _created_at(runtime: Runtime, tenant_id: uuid.UUID, seq: int) -> str:
    body = json.loads((_folder(runtime, tenant_id) / f"{seq:020d}.json").read_bytes())
    return str(body["created_at"])


def _forge_with_another_key(path: Path) -> None:
    body = json.loads(path.read_bytes())
    body["row_hash"] = "f" * 64
    signature = Ed25519PrivateKey.generate().sign(canonical(body))
    body["signature"] = base64.b64encode(signature).decode()  # key_id still claims ours
    path.write_text(json.dumps(body))


def _edit_keeping_the_signature(path: Path) -> None:
    body = json.loads(path.read_bytes())
    body["row_hash"] = "0" * 64
    path.write_text(json.dumps(body))


def _repeat_a_key(path: Path) -> None:
    # The genuine document, with a forged row_hash in front of the real one: a reader that
    # keeps the last value would find the signature valid.
    text = path.read_text()
    path.write_text('{"row_hash":"' + "e" * 64 + '",' + text[1:])


@pytest.mark.parametrize("forge", [_forge_with_another_key, _edit_keeping_the_signature,
                                   _repeat_a_key])
def test_a_forged_checkpoint_in_the_bucket_is_detected(quiet_tenant: Tenant, forge: Any
                                                       ) -> None:
    runtime = quiet_tenant.stack.runtime
    anchored = _three_checkpoints(quiet_tenant)
    forge(_folder(runtime, quiet_tenant.id) / f"{anchored[1]:020d}.json")
    with quiet_tenant.client() as client:
        result = client.audit.verify()
    assert (result.ok, result.first_bad_checkpoint, result.checkpoints_checked) == (
        False, anchored[1], 2)
    expected = ("in the bucket is not a well-formed checkpoint" if forge is _repeat_a_key else
                "in the bucket does not carry a valid signature of this server's checkpoint "
                "key: it was forged or altered")
    assert result.problem == f"checkpoint {anchored[1]} {expected}"


def test_a_checkpoint_copied_from_another_tenant_is_detected(quiet_stack: Stack) -> None:
    victim, other = quiet_stack.new_tenant(), quiet_stack.new_tenant()
    anchored = _three_checkpoints(victim)
    theirs = _anchor(quiet_stack.runtime, other.id)
    source = _folder(quiet_stack.runtime, other.id) / f"{theirs:020d}.json"
    (_folder(quiet_stack.runtime, victim.id) / source.name).write_bytes(source.read_bytes())
    with victim.client() as client:
        result = client.audit.verify()
    assert result.ok is False
    assert result.problem == (f"checkpoint {theirs} in the bucket was signed for another "
                              "tenant or another position")
    assert result.first_bad_checkpoint == theirs and theirs not in anchored


@pytest.mark.parametrize("which", ["middle", "latest"])
def test_a_deleted_checkpoint_is_detected(quiet_tenant: Tenant, which: str) -> None:
    runtime = quiet_tenant.stack.runtime
    anchored = _three_checkpoints(quiet_tenant)
    gone = anchored[1] if which == "middle" else anchored[2]
    (_folder(runtime, quiet_tenant.id) / f"{gone:020d}.json").unlink()
    with quiet_tenant.client() as client:
        result = client.audit.verify()
    assert result.ok is False
    if which == "middle":
        assert result.first_bad_checkpoint == anchored[2]
        assert result.problem == (f"checkpoint {anchored[2]} follows checkpoint {anchored[1]}, "
                                  "which is missing from the bucket: checkpoints were deleted")
    else:
        assert result.first_bad_checkpoint == anchored[2]
        assert result.problem == (f"checkpoint {anchored[2]} was written into the bucket but "
                                  "is no longer there: checkpoints were deleted")


# -- a bucket that cannot be reached ---------------------------------------------------------


@pytest.fixture
def s3_through_proxy(moto_server: MotoServer) -> Iterator[tuple[TcpProxy, dict[str, Any]]]:
    config = new_s3_bucket(moto_server)
    proxy = TcpProxy(moto_server.port)
    try:
        yield proxy, {**config, "endpoint_url": proxy.endpoint}
    finally:
        proxy.cut()


def test_a_bucket_outage_never_stops_sealing_and_shows_as_lag(
        quiet_world: ServiceWorld, s3_through_proxy: tuple[TcpProxy, dict[str, Any]]) -> None:
    from control_plane.storage_config import service as storage_config
    from control_plane.storage_config.schemas import S3ConfigIn

    proxy, config = s3_through_proxy
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    with runtime.sessions() as session:
        storage_config.configure(
            session, runtime.plane, quiet_world.actor,
            S3ConfigIn.model_validate({"storage_type": "s3", "connection_config": config}),
            allow_local=True, local_roots=[])
    before = _anchor(runtime, tid)

    proxy.cut()
    t0 = utcnow()
    sealed = _append(runtime, tid, 4)
    with runtime.sessions() as session:
        checkpoints.anchor_due(session, runtime.plane, runtime.settings,
                               now=t0 + timedelta(seconds=61))
    head = _head(runtime, tid)
    assert (head.last_seq, head.anchored_seq, head.anchor_problem) == (
        sealed, before, "unreachable")
    assert _append(runtime, tid, 2) == sealed + 2  # sealing goes on
    with runtime.sessions() as session:
        during = audit.verify(session, tid, plane=runtime.plane, settings=runtime.settings)
    assert during.ok is False
    with runtime.sessions() as session:
        s3_id = runtime.plane.active(session, tid).config_id
    assert during.problem == (f"the checkpoints in storage configuration sc_{s3_id.hex} could "
                              "not be read (unreachable); retry when the bucket is reachable")
    assert (during.anchored_seq, during.anchor_problem) == (before, "unreachable")
    assert during.anchor_lag_seconds is not None and during.anchor_lag_seconds > 0

    proxy.restore()
    with runtime.sessions() as session:  # the next interval retries and catches up
        checkpoints.anchor_due(session, runtime.plane, runtime.settings,
                               now=t0 + timedelta(seconds=122))
        after = audit.verify(session, tid, plane=runtime.plane, settings=runtime.settings)
    assert (after.ok, after.anchored_seq, after.anchor_problem) == (True, sealed + 2, None)
    assert (after.checkpoints_checked, after.last_checkpoint_seq) == (2, sealed + 2)
    # The first checkpoint left the operator's bucket, where the tenant started, for its own:
    # the move is recorded there.
    assert (after.anchors_checked, after.anchor_moves) == (2, 1)
    assert after.anchor_lag_seconds is None
