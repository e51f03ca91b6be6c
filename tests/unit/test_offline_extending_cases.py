"""``offline.verify`` holding each checkpoint to the one before it: the consistency proofs
(deleted, dangling, swapped, of another history, malformed), and the same checkpoints read
from two places (a copy agrees; a fork is named). Local directories, no database."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from control_plane.audit import offline
from tests.unit.offline_logs import Anchor, Log, b64, checkpoint, fails, root_anchor, three, verify


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def root(tmp_path: Path, log: Log) -> Anchor:
    return root_anchor(tmp_path, log.tenant_id)


def test_a_proof_whose_checkpoints_are_gone_names_the_first_missing(log: Log,
                                                                    root: Anchor) -> None:
    three(log, root)
    root.path(*offline.checkpoint_path(3)).unlink()
    assert fails(log, root) == (
        "root holds the consistency proof from checkpoint 3 to checkpoint 7, but checkpoint 3 "
        "is in none of the buckets: checkpoints were deleted")
    checkpoint(log, root, 3, None)
    root.path(*offline.checkpoint_path(12)).unlink()
    assert fails(log, root) == (
        "root holds the consistency proof from checkpoint 7 to checkpoint 12, but checkpoint "
        "12 is in none of the buckets: checkpoints were deleted")


def test_a_missing_proof_is_named_with_the_places_of_both_checkpoints(
        log: Log, root: Anchor, tmp_path: Path) -> None:
    three(log, root)
    root.path(*offline.consistency_path(7, 12)).unlink()
    assert fails(log, root) == (
        "there is no consistency proof from checkpoint 7 to checkpoint 12 in root: a "
        "checkpoint between them, or the proof, was deleted")
    copy = Anchor(tmp_path / "copy", root.place, None)
    shutil.copytree(root.root, copy.root)
    assert fails(log, root, copy) == (
        "there is no consistency proof from checkpoint 7 to checkpoint 12 in root and copy: a "
        "checkpoint between them, or the proof, was deleted")


def test_a_swapped_proof_names_both_pairs(log: Log, root: Anchor) -> None:
    three(log, root)
    first, second = (root.path(*offline.consistency_path(*pair)) for pair in ((3, 7), (7, 12)))
    held = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(held)
    assert fails(log, root) == ("the file of the consistency proof from 3 to 7 in root holds "
                                "the proof from 7 to 12: proofs were swapped")


def test_a_proof_of_another_history_or_of_nothing_does_not_verify(log: Log,
                                                                  root: Anchor) -> None:
    three(log, root)
    other = Log(log.tenant_id, log.key)
    other.append(detail="another history", n=12)
    sentence = ("checkpoint 12 does not extend checkpoint 7: their consistency proof in root "
                "does not verify (the log was rewritten between them, or the proof was "
                "replaced)")
    for hashes in ([b64(h) for h in other.consistency(7, 12)], []):
        root.put(offline.consistency_path(7, 12),
                 json.dumps({"first": 7, "second": 12, "hashes": hashes}))
        assert fails(log, root) == sentence


def _proof(log: Log) -> dict[str, object]:
    return {"first": 7, "second": 12, "hashes": [b64(h) for h in log.consistency(7, 12)]}


@pytest.mark.parametrize("tamper", [
    "not_json", "list", "no_hashes", "no_first", "hashes_a_number", "junk_hash",
    "non_ascii_hash",
])
def test_a_malformed_proof_was_altered(log: Log, root: Anchor, tamper: str) -> None:
    three(log, root)
    proof = _proof(log)
    hashes = list(proof["hashes"])  # type: ignore[call-overload]
    data = {
        "not_json": lambda: "{",
        "list": lambda: json.dumps([proof]),
        "no_hashes": lambda: json.dumps({"first": 7, "second": 12}),
        "no_first": lambda: json.dumps({"second": 12, "hashes": hashes}),
        "hashes_a_number": lambda: json.dumps({**proof, "hashes": 5}),
        "junk_hash": lambda: json.dumps({**proof, "hashes": ["!" + h for h in hashes]}),
        "non_ascii_hash": lambda: json.dumps({**proof, "hashes": ["é" + hashes[0]]}),
    }[tamper]()
    root.put(offline.consistency_path(7, 12), data)
    assert fails(log, root) == ("the consistency proof from 7 to 12 in root is not a "
                                "well-formed proof: it was altered")
    root.put(offline.consistency_path(7, 12), json.dumps(proof))
    assert verify(log, root).proofs == 2


def test_the_same_checkpoints_in_two_places_agree_and_a_fork_is_named(
        log: Log, root: Anchor, tmp_path: Path) -> None:
    three(log, root)
    copy = Anchor(tmp_path / "copy", root.place, None)
    shutil.copytree(root.root, copy.root)
    verified = verify(log, root, copy)
    assert (verified.checkpoints, verified.places, verified.proofs, verified.moves) == \
        (3, 2, 2, 0)
    assert verified.heads == ((3, log.root(3)), (7, log.root(7)), (12, log.root(12)))
    third = Anchor(tmp_path / "third", root.place, None)
    other = Log(log.tenant_id, log.key)
    other.leaves = list(log.leaves[:11])
    other.append(detail="forked")
    third.put(offline.checkpoint_path(12), other.note(12))
    assert fails(log, root, copy, third) == ("root and third hold two different trees of 12 "
                                             "rows: the log was forked")
    assert fails(log, third, copy, root) == ("third and copy hold two different trees of 12 "
                                             "rows: the log was forked")
