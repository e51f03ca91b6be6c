"""The audit tree's checkpoints in the tenant's bucket: each signed note with the consistency
proof from the previous one beside it, at most once an interval, checked here with
``control_plane.tlog`` alone; the chain's JSON checkpoints go on as before."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from pathlib import Path

from control_plane.audit import checkpoints, tlog_anchor, tree
from control_plane.audit import service as audit
from control_plane.audit.notes import signed_checkpoint, signer
from control_plane.db.base import utcnow
from control_plane.db.engine import begin_write
from control_plane.identity import Actor
from control_plane.tlog import merkle, note
from tests.support.service import ServiceWorld


def _grow(world: ServiceWorld, n: int) -> None:
    with world.runtime.sessions() as session:
        begin_write(session)
        for i in range(n):
            audit.record(session, Actor(world.tenant_id, "api", "bucket-test"), "write",
                         detail=f"row {i}")
        session.commit()
        audit.seal(session, world.tenant_id)


def _folder(world: ServiceWorld) -> Path:
    return (world.runtime.settings.data_dir / "bucket" / "tenants" / str(world.tenant_id)
            / "audit" / "checkpoints" / "tlog")


def _files(world: ServiceWorld) -> list[str]:
    folder = _folder(world)
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _publish(world: ServiceWorld, seconds: float, start: datetime) -> bool:
    runtime = world.runtime
    now = start + timedelta(seconds=seconds)
    interval = timedelta(seconds=runtime.settings.audit_tlog_checkpoint_seconds)
    with runtime.sessions() as session:
        return tlog_anchor.publish(session, runtime.plane, runtime.settings, world.tenant_id,
                                   now=now, cutoff=now - interval)


def test_checkpoints_and_consistency_proofs_land_in_the_bucket(world: ServiceWorld) -> None:
    runtime, t0 = world.runtime, utcnow()
    verifier = signer(runtime.settings).verifier
    _grow(world, 3)
    assert _publish(world, 0, t0) is True
    first_name = _files(world)[0]
    first = note.parse_checkpoint(note.verify((_folder(world) / first_name).read_text(),
                                              verifier))
    _grow(world, 5)
    assert _publish(world, 1, t0) is False  # within the interval (5 s)
    assert _publish(world, 6, t0) is True
    assert _publish(world, 12, t0) is False  # nothing new
    with runtime.sessions() as session:
        second_size = int(tree.size_of(session, world.tenant_id))
    names = _files(world)
    second = note.parse_checkpoint(note.verify(
        (_folder(world) / f"checkpoint/{second_size:020d}").read_text(), verifier))
    proof = json.loads((_folder(world) / names[2]).read_text())

    assert first_name == f"checkpoint/{first.size:020d}"
    assert names == [f"checkpoint/{first.size:020d}", f"checkpoint/{second.size:020d}",
                     f"consistency/{first.size:020d}-{second.size:020d}"]
    assert (first.origin, second.origin) == (f"memplane/audit/{world.tenant_id}",) * 2
    assert second.size == first.size + 5
    assert sorted(proof) == ["first", "hashes", "second"]
    assert (proof["first"], proof["second"]) == (first.size, second.size)
    hashes = [base64.b64decode(h, validate=True) for h in proof["hashes"]]
    assert merkle.verify_consistency(first.size, second.size, first.root, second.root, hashes)
    assert (_folder(world) / names[2]).read_bytes() == json.dumps(
        proof, sort_keys=True, separators=(",", ":")).encode()


def test_the_sealers_round_writes_both_kinds_and_verify_still_passes(world: ServiceWorld) -> None:
    runtime = world.runtime
    _grow(world, 4)
    with runtime.sessions() as session:
        checkpoints.anchor_due(session, runtime.plane, runtime.settings)
    json_folder = _folder(world).parent
    with runtime.sessions() as session:
        size = tree.size_of(session, world.tenant_id)
        result = audit.verify(session, world.tenant_id, plane=runtime.plane,
                              settings=runtime.settings)
    assert _files(world) == [f"checkpoint/{size:020d}"]
    assert sorted(p.name for p in json_folder.iterdir() if p.is_file()) == [
        f"{size:020d}.json"]
    assert (result.ok, result.checkpoints_checked, result.problem) == (True, 1, None)


def test_a_write_another_replica_made_first_counts_as_done(world: ServiceWorld) -> None:
    _grow(world, 2)
    t0 = utcnow()
    assert _publish(world, 0, t0) is True
    _grow(world, 2)
    with world.runtime.sessions() as session:
        size = tree.size_of(session, world.tenant_id)
        _, root = tree.head(session, world.tenant_id)
    # The same note, written by another replica a moment before: the same bytes.
    path = _folder(world) / f"checkpoint/{size:020d}"
    path.write_text(signed_checkpoint(world.runtime.settings, world.tenant_id, size, root))
    assert _publish(world, 6, t0) is True
    assert [n for n in _files(world) if n.startswith("checkpoint/")][-1] == \
        f"checkpoint/{size:020d}"
