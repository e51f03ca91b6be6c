"""A real server whose tenant's anchor moves twice — from the operator's bucket to an S3 bucket
(the emulator), then to a local one: each move is an ``audit_anchor_moved`` row checkpointed in
the bucket it leaves, and ``memplane audit verify --bucket`` follows the log through all three
from the buckets alone; given only the first, it says where the log went."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import delete, select
from typer.testing import CliRunner

from control_plane.audit import service as audit
from control_plane.audit import tlog_anchor
from control_plane.audit.anchors import MOVE_OPERATION
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditHead, StorageConfig
from control_plane.signing import signing_key
from control_plane.tlog import merkle, note
from memplane.cli import app
from tests.security.test_audit_anchor import _append, _truncate, quiet_stack, quiet_world
from tests.security.test_audit_anchor_moves import _anchor, _body, _configure
from tests.support.emulators import MotoServer, new_s3_bucket
from tests.support.service import ServiceWorld

__all__ = ["quiet_stack", "quiet_world"]


def publish(world: ServiceWorld) -> int:
    runtime = world.runtime
    with runtime.sessions() as session:
        audit.seal(session, world.tenant_id)
        assert tlog_anchor.publish(session, runtime.plane, runtime.settings, world.tenant_id)
        head = session.get(AuditHead, world.tenant_id)
        assert head is not None
        return int(head.tlog_size)


def config_row(world: ServiceWorld, config_id: uuid.UUID) -> StorageConfig:
    with world.runtime.sessions() as session:
        row = session.get(StorageConfig, config_id)
        assert row is not None
        session.expunge(row)
        return row


def test_each_move_is_a_checkpointed_row_and_the_buckets_alone_follow_it(
        quiet_world: ServiceWorld, moto_server: MotoServer, tmp_path: Path) -> None:
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    _append(runtime, tid, 3)
    _anchor(runtime, tid)
    first = publish(quiet_world)
    s3_config = new_s3_bucket(moto_server)
    s3 = _configure(quiet_world, {"storage_type": "s3", "connection_config": s3_config},
                    tmp_path)
    _append(runtime, tid, 1)
    before_move = publish(quiet_world)  # still into the root: the move is not in the log yet
    moved_to_s3 = _anchor(runtime, tid)
    _append(runtime, tid, 2)
    in_s3 = publish(quiet_world)
    local = _configure(quiet_world, {"storage_type": "local",
                                     "connection_config": {"root": str(tmp_path / "own")}},
                       tmp_path)
    moved_to_local = _anchor(runtime, tid)
    _append(runtime, tid, 2)
    in_local = publish(quiet_world)

    # the move out of the root: its row, sealed, proven in a checkpoint of the root
    root_dir = runtime.settings.data_dir / "bucket" / "tenants" / str(tid)
    move = json.loads((root_dir / "audit" / "checkpoints" /
                       f"{moved_to_s3:020d}-moved.json").read_bytes())
    proof = move["tlog"]
    with runtime.sessions() as session:
        row = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == tid, AccessLog.operation == MOVE_OPERATION)
            .order_by(AccessLog.seq)).first()
        assert row is not None and row.seq == proof["seq"]
        assert row.detail == f"audit checkpoints move to storage configuration sc_{s3.hex}"
    text = (root_dir / "audit" / "checkpoints" / "tlog" / "checkpoint" /
            f"{proof['size']:020d}").read_text()
    vkey = note.Signer(runtime.settings.audit_log_name,
                       signing_key(runtime.settings).private).verifier.text()
    checkpoint = note.parse_checkpoint(note.verify(text, note.parse_verifier(vkey)))
    assert merkle.verify_inclusion(merkle.leaf_hash(base64.b64decode(proof["leaf"])),
                                   proof["seq"] - 1, checkpoint.size,
                                   [base64.b64decode(h) for h in proof["hashes"]],
                                   checkpoint.root)
    assert first < before_move < proof["size"] < in_s3 < in_local
    assert (root_dir / "audit" / "checkpoints" / "tlog" / "checkpoint" /
            f"{before_move:020d}").exists()
    assert _body(runtime, s3, f"{moved_to_s3:020d}.json")["moved_from"] == move["anchor"]

    s3_row, local_row = config_row(quiet_world, s3), config_row(quiet_world, local)
    query = urlencode({k: s3_config[k] for k in ("region", "endpoint_url", "access_key_id",
                                                 "secret_access_key")})
    s3_url = f"s3://{s3_row.bucket}/{s3_row.prefix}?{query}"
    local_dir = str(Path(tmp_path / "own") / local_row.prefix)
    result = CliRunner().invoke(app, ["audit", "verify", "--bucket", str(root_dir),
                                      "--bucket", s3_url, "--bucket", local_dir,
                                      "--tenant", str(tid), "--verifier-key", vkey])
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert (summary["places"], summary["moves"], summary["last_size"]) == (3, 2, in_local)
    assert json.loads((Path(local_dir) / "audit" / "checkpoints" /
                       f"{moved_to_local:020d}.json").read_bytes())["moved_from"]["prefix"] == (
        s3_row.prefix)

    # given the first bucket alone, the verify names where the log went
    result = CliRunner().invoke(app, ["audit", "verify", "--bucket", str(root_dir),
                                      "--verifier-key", vkey])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problem"] == (
        f"{root_dir} records that the anchor moved to storage configuration sc_{s3.hex} "
        f"(proven in its checkpoint {proof['size']}), which was not given: pass that bucket "
        "with another --bucket so the rest of the log is checked")

    # the database's verify still passes: the chain and its JSON checkpoints agree
    with runtime.sessions() as session:
        assert audit.verify(session, tid, plane=runtime.plane, settings=runtime.settings).ok



def test_rows_removed_from_the_database_fail_the_leaf_check(quiet_world: ServiceWorld) -> None:
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    _append(runtime, tid, 4)
    first = publish(quiet_world)
    _append(runtime, tid, 3)
    second = publish(quiet_world)
    root_dir = runtime.settings.data_dir / "bucket" / "tenants" / str(tid)
    vkey = note.Signer(runtime.settings.audit_log_name,
                       signing_key(runtime.settings).private).verifier.text()
    args = ["audit", "verify", "--bucket", str(root_dir), "--verifier-key", vkey,
            "--database-url", runtime.settings.resolved_database_url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows_checked"] == second

    with runtime.sessions() as session:  # one row in the middle deleted
        begin_write(session)
        session.execute(delete(AccessLog).where(AccessLog.tenant_id == tid,
                                                AccessLog.seq == first + 1))
        session.commit()
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "ok": False, "rows_checked": first, "problem": (
            f"row {first + 1} is missing from the database, but checkpoint {second} covers "
            "it: rows were removed")}

    _truncate(runtime, tid, first + 1)  # and the tail with it, the head moved back
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problem"] == (
        f"the database holds {first} sealed rows, but checkpoint {second} signed {second}: "
        "rows were removed")


def test_the_servers_bucket_verifies_and_each_tamper_fails(quiet_world: ServiceWorld) -> None:
    runtime, tid = quiet_world.runtime, quiet_world.tenant_id
    sizes = []
    for n in (2, 3, 4):
        _append(runtime, tid, n)
        sizes.append(publish(quiet_world))
    tlog = runtime.settings.data_dir / "bucket" / "tenants" / str(tid) / "audit" / \
        "checkpoints" / "tlog"
    vkey = note.Signer(runtime.settings.audit_log_name,
                       signing_key(runtime.settings).private).verifier.text()

    def verify() -> tuple[int, dict[str, Any]]:
        result = CliRunner().invoke(app, ["audit", "verify", "--bucket", str(tlog.parents[2]),
                                          "--verifier-key", vkey])
        return result.exit_code, json.loads(result.stdout)

    code, summary = verify()
    assert (code, summary["checkpoints"], summary["consistency_proofs"]) == (0, 3, 2)
    first, second = (tlog / "consistency" / f"{a:020d}-{b:020d}"
                     for a, b in zip(sizes, sizes[1:], strict=False))
    held = first.read_bytes()
    first.write_bytes(second.read_bytes())
    code, summary = verify()
    assert (code, summary["problem"]) == (1, (
        f"the file of the consistency proof from {sizes[0]} to {sizes[1]} in "
        f"{tlog.parents[2]} holds the proof from {sizes[1]} to {sizes[2]}: proofs were "
        "swapped"))
    first.write_bytes(held)
    (tlog / "checkpoint" / f"{sizes[1]:020d}").unlink()
    code, summary = verify()
    assert (code, summary["problem"]) == (1, (
        f"{tlog.parents[2]} holds the consistency proof from checkpoint {sizes[0]} to "
        f"checkpoint {sizes[1]}, but checkpoint {sizes[1]} is in none of the buckets: "
        "checkpoints were deleted"))
