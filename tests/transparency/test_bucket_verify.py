"""``memplane audit verify --bucket``: the audit log proven from the tenant's buckets and the
log's verifier key alone, and each tamper with the bucket named in one sentence.

The buckets are written by ``logs.py`` from ``control_plane.tlog`` as the sealer lays them
out; each tamper is what someone with write access to the bucket (but not the key) can do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from control_plane.audit import offline
from control_plane.audit.anchors import FOLDER, checkpoint_name
from control_plane.tlog import note
from memplane.cli import app
from tests.transparency.logs import (
    Anchor,
    Log,
    b64,
    checkpoint,
    move,
    root_anchor,
    tenant_anchor,
    three_checkpoints,
)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["audit", "verify", *args])
    return result.exit_code, result.stdout, result.stderr


def verify(log: Log, *anchors: Anchor, tenant: bool = True) -> tuple[int, dict, str]:
    args = [a for anchor in anchors for a in ("--bucket", str(anchor.root))]
    if tenant:
        args += ["--tenant", str(log.tenant_id)]
    code, out, err = run(*args, "--verifier-key", log.vkey)
    return code, json.loads(out.strip().splitlines()[-1]), " ".join(err.split())


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def root(tmp_path: Path, log: Log) -> Anchor:
    """The operator's default bucket, the tenant's objects at ``tenants/<id>``."""
    anchor = root_anchor(tmp_path, log.tenant_id)
    return Anchor(anchor.root / "tenants" / str(log.tenant_id), anchor.place, None)


def test_a_good_log_verifies_from_the_bucket_root_and_the_tenant_prefix(
        log: Log, root: Anchor, tmp_path: Path) -> None:
    assert three_checkpoints(log, root) == [3, 7, 12]
    code, summary, err = verify(log, root)
    assert code == 0, err
    assert summary == {"ok": True, "origin": f"memplane/audit/{log.tenant_id}",
                       "checkpoints": 3, "first_size": 3, "last_size": 12,
                       "last_root": b64(log.root(12)),
                       "places": 1, "moves": 0, "consistency_proofs": 2}
    assert err == (f"valid: 3 checkpoints of memplane/audit/{log.tenant_id} in 1 bucket(s), "
                   "each extending the one before; 0 move(s) of the anchor, each in the log")
    # the operator's bucket itself, with --tenant, is read at tenants/<id>
    code, out, err = run("--bucket", str(tmp_path / "root"), "--tenant", str(log.tenant_id),
                         "--verifier-key", log.vkey)
    assert code == 0, err
    assert json.loads(out)["checkpoints"] == 3
    # the verifier key may be given as a file
    (tmp_path / "log.vkey").write_text(log.vkey + "\n")
    code, out, err = run("--bucket", str(root.root), "--verifier-key", str(tmp_path / "log.vkey"))
    assert code == 0, err


def test_a_deleted_checkpoint_fails(log: Log, root: Anchor) -> None:
    three_checkpoints(log, root)
    root.path(*offline.checkpoint_path(7)).unlink()
    code, summary, err = verify(log, root)
    assert code == 1
    assert summary == {"ok": False, "problem": (
        f"{root.root} holds the consistency proof from checkpoint 3 to checkpoint 7, but "
        "checkpoint 7 is in none of the buckets: checkpoints were deleted")}
    assert err == f"INVALID: {summary['problem']}"


def test_a_deleted_checkpoint_and_its_proofs_fail(log: Log, root: Anchor) -> None:
    three_checkpoints(log, root)
    for parts in (offline.checkpoint_path(7), offline.consistency_path(3, 7),
                  offline.consistency_path(7, 12)):
        root.path(*parts).unlink()
    code, summary, _ = verify(log, root)
    assert code == 1
    assert summary["problem"] == (
        f"there is no consistency proof from checkpoint 3 to checkpoint 12 in {root.root}: a "
        "checkpoint between them, or the proof, was deleted")


def test_a_swapped_proof_fails(log: Log, root: Anchor) -> None:
    three_checkpoints(log, root)
    first, second = (root.path(*offline.consistency_path(*pair)) for pair in ((3, 7), (7, 12)))
    held = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(held)
    code, summary, _ = verify(log, root)
    assert code == 1
    assert summary["problem"] == (
        f"the file of the consistency proof from 3 to 7 in {root.root} holds the proof from "
        "7 to 12: proofs were swapped")


def test_a_proof_of_another_history_fails(log: Log, root: Anchor) -> None:
    """The proof's file names the right sizes, but its hashes are another tree's."""
    three_checkpoints(log, root)
    other = Log(log.tenant_id, log.key)
    other.append(detail="another history", n=12)
    root.put(offline.consistency_path(7, 12), json.dumps(
        {"first": 7, "second": 12, "hashes": [b64(h) for h in other.consistency(7, 12)]}))
    code, summary, _ = verify(log, root)
    assert code == 1
    assert summary["problem"] == (
        f"checkpoint 12 does not extend checkpoint 7: their consistency proof in {root.root} "
        "does not verify (the log was rewritten between them, or the proof was replaced)")


def test_a_checkpoint_signed_by_another_key_fails(log: Log, root: Anchor) -> None:
    three_checkpoints(log, root)
    forger = note.Signer(log.name, Ed25519PrivateKey.generate())
    root.put(offline.checkpoint_path(12), log.note(12, forger))
    code, summary, _ = verify(log, root)
    assert code == 1
    assert summary["problem"] == (
        f"checkpoint 00000000000000000012 in {root.root} does not carry a valid signature of "
        "the log's key memplane (the note carries no signature of memplane): it was forged, "
        "altered or signed by another key")


def test_a_checkpoint_whose_size_goes_down_fails(log: Log, root: Anchor) -> None:
    three_checkpoints(log, root)
    root.put(offline.checkpoint_path(20), log.note(5))
    code, summary, _ = verify(log, root)
    assert code == 1
    assert summary["problem"] == (
        f"checkpoint 00000000000000000020 in {root.root} holds a tree of 5 rows, fewer than "
        "the checkpoint before it (12): the log's size went down")


def test_another_tenants_log_is_refused(log: Log, root: Anchor) -> None:
    three_checkpoints(log, root)
    other = Log(key=log.key)
    code, summary, _ = verify(other, root)
    assert code == 1
    assert summary["problem"] == (f"the checkpoints are of the log memplane/audit/"
                                  f"{log.tenant_id}, not of tenant {other.tenant_id}")


def test_an_empty_bucket_does_not_pass(log: Log, root: Anchor) -> None:
    root.root.mkdir(parents=True)
    code, summary, _ = verify(log, root, tenant=False)
    assert code == 1
    assert summary["problem"] == (f"{root.root} hold no checkpoint of the audit log (nothing "
                                  "under audit/checkpoints/tlog/checkpoint/)")


# -- moves of the anchor ---------------------------------------------------------------------


def moved_log(log: Log, root: Anchor, tmp_path: Path, *, checkpointed: bool = True
              ) -> Anchor:
    """Checkpoints 3, 7, 12 in the root, the anchor moves to a tenant bucket (checkpoint 13),
    and checkpoints 16 and 20 follow there."""
    three_checkpoints(log, root)
    own = tenant_anchor(tmp_path, "acme-memory")
    moved = move(log, root, own, 12, checkpointed=checkpointed)
    previous = moved if checkpointed else 12
    for n in (3, 4):
        size = log.append(n=n)
        checkpoint(log, own, size, previous)
        previous = size
    return own


def test_a_checkpointed_move_is_followed_into_the_new_bucket(log: Log, root: Anchor,
                                                             tmp_path: Path) -> None:
    own = moved_log(log, root, tmp_path)
    code, summary, err = verify(log, root, own)
    assert code == 0, err
    assert (summary["checkpoints"], summary["last_size"], summary["places"], summary["moves"],
            summary["consistency_proofs"]) == (6, 20, 2, 1, 5)


def test_a_move_to_a_bucket_not_given_fails(log: Log, root: Anchor, tmp_path: Path) -> None:
    own = moved_log(log, root, tmp_path)
    code, summary, _ = verify(log, root)
    assert code == 1
    assert summary["problem"] == (
        f"{root.root} records that the anchor moved to storage configuration "
        f"sc_{own.config_id.hex if own.config_id else ''} (proven in its checkpoint 13), which "
        "was not given: pass that bucket with another --bucket so the rest of the log is "
        "checked")


def test_an_anchor_moved_without_a_checkpointed_move_fails(log: Log, root: Anchor,
                                                           tmp_path: Path) -> None:
    """The old server's move: a signed record, but no row of the log proves it."""
    own = moved_log(log, root, tmp_path, checkpointed=False)
    code, summary, _ = verify(log, root, own)
    assert code == 1
    assert summary["problem"] == (
        f"{root.root} records that the anchor moved to {offline.label(own.place, own.config_id)}"
        " at row 13, but the move is not in the log (no checkpoint proves it): the anchor was "
        "moved without a checkpointed record of the move")


def test_an_anchor_moved_with_no_record_at_all_fails(log: Log, root: Anchor,
                                                     tmp_path: Path) -> None:
    own = moved_log(log, root, tmp_path, checkpointed=False)
    root.path(*FOLDER, checkpoint_name(13, moved=True)).unlink()
    code, summary, _ = verify(log, root, own)
    assert code == 1
    assert summary["problem"] == (
        f"the log continues in {own.root} from checkpoint 16, but no bucket given holds a "
        "checkpointed record of the anchor moving there: the anchor was moved silently")


def test_a_move_whose_checkpoint_was_deleted_fails(log: Log, root: Anchor,
                                                   tmp_path: Path) -> None:
    own = moved_log(log, root, tmp_path)
    for anchor in (root, own):
        anchor.path(*offline.checkpoint_path(13)).unlink()
    root.path(*offline.consistency_path(12, 13)).unlink()
    own.path(*offline.consistency_path(13, 16)).unlink()
    code, summary, _ = verify(log, root, own)
    assert code == 1
    assert summary["problem"] == (
        f"there is no consistency proof from checkpoint 12 to checkpoint 16 in {root.root} and "
        f"{own.root}: a checkpoint between them, or the proof, was deleted")


def test_the_new_bucket_given_first_is_refused(log: Log, root: Anchor, tmp_path: Path) -> None:
    own = moved_log(log, root, tmp_path)
    code, summary, _ = verify(log, own, root)
    assert code == 1
    assert summary["problem"] == (
        f"the log's first checkpoint (3) is in {root.root}, not in {own.root}: give the bucket "
        "where the log starts first")


def test_a_fork_between_two_buckets_fails(log: Log, root: Anchor, tmp_path: Path) -> None:
    own = moved_log(log, root, tmp_path)
    other = Log(log.tenant_id, log.key)
    other.leaves = list(log.leaves[:12])
    other.append(n=1)
    own.put(offline.checkpoint_path(13), other.note(13))
    code, summary, _ = verify(log, root, own)
    assert code == 1
    assert summary["problem"] == (f"{root.root} and {own.root} hold two different trees of 13 "
                                  "rows: the log was forked")


def test_a_copied_bucket_is_not_a_second_place(log: Log, root: Anchor, tmp_path: Path) -> None:
    """The same checkpoints in two given places extend each other: no move is needed."""
    three_checkpoints(log, root)
    copy = Anchor(tmp_path / "copy", root.place, None)
    shutil.copytree(root.root, copy.root)
    code, summary, err = verify(log, root, copy)
    assert code == 0, err
    assert summary["places"] == 2


def test_a_silent_return_to_the_first_bucket_fails(log: Log, root: Anchor,
                                                   tmp_path: Path) -> None:
    """Moved to the tenant's bucket with a record, then back into the root without one."""
    own = moved_log(log, root, tmp_path)
    size = log.append(n=5)
    checkpoint(log, root, size, 20)
    code, summary, _ = verify(log, root, own)
    assert code == 1
    assert summary["problem"] == (
        f"the log goes on from checkpoint 20 in {own.root} to checkpoint 25 in "
        f"{root.root} without a checkpointed record of the anchor moving: the anchor was "
        "moved silently")


def test_a_move_out_of_a_bucket_that_took_no_more_writes_is_recorded_in_the_first(
        log: Log, root: Anchor, tmp_path: Path) -> None:
    """The tenant's bucket stopped taking writes: the move out of it, its row and its
    checkpoint, went to the root, and the log goes on in the next bucket."""
    own = moved_log(log, root, tmp_path)  # checkpoints 13, 16, 20 in the tenant's bucket
    later = tenant_anchor(tmp_path, "acme-archive")
    seq = log.append("audit_anchor_moved", offline.move_detail(later.place, later.config_id))
    checkpoint(log, root, seq, 20)  # the root, not the unwritable bucket, holds it
    body = {"tenant_id": str(log.tenant_id), "seq": seq, "row_hash": "0" * 64, "prev_seq": 20,
            "created_at": "2025-01-01T00:00:00+00:00", "anchor": own.describe(),
            "moved_to": later.describe(),
            "tlog": {"size": seq, "seq": seq, "leaf": b64(log.leaves[seq - 1]),
                     "hashes": [b64(h) for h in log.inclusion(seq, seq)]}}
    root.put((*FOLDER, checkpoint_name(seq, moved=True)), log.sign_json(body))
    size = log.append(n=3)
    checkpoint(log, later, size, seq)
    code, summary, err = verify(log, root, own, later)
    assert code == 0, err
    assert (summary["places"], summary["moves"], summary["last_size"]) == (3, 2, size)
    # the same checkpoints without the move record: the log went on elsewhere silently
    root.path(*FOLDER, checkpoint_name(seq, moved=True)).unlink()
    code, summary, _ = verify(log, root, own, later)
    assert code == 1
    assert summary["problem"] == (
        f"the log continues in {later.root} from checkpoint {size}, but no bucket given holds "
        "a checkpointed record of the anchor moving there: the anchor was moved silently")
