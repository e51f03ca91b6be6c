"""``offline.verify`` following the anchor's moves: a move proven in the log and followed into
the place it names, and the sentence of each way around it — a record not given, not
checkpointed, not well formed, proven in a checkpoint that is not there or of another row; a
place named only by an old or nested checkpoint; a silent jump between places, even between
places each entered by a move. Local directories, no database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit import offline
from control_plane.audit.anchors import FOLDER, MOVE_OPERATION, checkpoint_name, move_detail
from tests.transparency.logs import move
from tests.unit.offline_logs import (
    Anchor,
    Log,
    b64,
    checkpoint,
    evidence,
    fails,
    record,
    root_anchor,
    tenant_anchor,
    three,
    verify,
)


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def root(tmp_path: Path, log: Log) -> Anchor:
    return root_anchor(tmp_path, log.tenant_id)


@pytest.fixture
def own(tmp_path: Path) -> Anchor:
    return tenant_anchor(tmp_path, "own")


def moved(log: Log, root: Anchor, own: Anchor, *, checkpointed: bool = True) -> None:
    """Checkpoints 3, 7, 12 in the root, the anchor moves to ``own`` (row and checkpoint 13),
    checkpoints 16 and 20 follow there."""
    three(log, root)
    previous = move(log, root, own, 12, checkpointed=checkpointed)
    previous = previous if checkpointed else 12
    for n in (3, 4):
        size = log.append(n=n)
        checkpoint(log, own, size, previous)
        previous = size


def test_a_proven_move_is_followed_to_an_exact_report(log: Log, root: Anchor,
                                                      own: Anchor) -> None:
    moved(log, root, own)
    sizes = (3, 7, 12, 13, 16, 20)
    assert verify(log, root, own) == offline.Verified(
        log.origin, 6, 3, 20, log.root(20), 2, 1, 5,
        tuple((size, log.root(size)) for size in sizes))


def test_a_move_to_a_place_not_given_is_named(log: Log, root: Anchor, own: Anchor) -> None:
    moved(log, root, own)
    assert own.config_id is not None
    assert fails(log, root) == (
        f"root records that the anchor moved to storage configuration "
        f"sc_{own.config_id.hex} (proven in its checkpoint 13), which was not given: pass "
        "that bucket with another --bucket so the rest of the log is checked")


def test_a_move_without_a_checkpoint_or_without_a_record_is_silent(
        log: Log, root: Anchor, own: Anchor) -> None:
    moved(log, root, own, checkpointed=False)
    where = f"root records that the anchor moved to {offline.label(own.place, own.config_id)}"
    assert fails(log, root, own) == (
        f"{where} at row 13, but the move is not in the log (no checkpoint proves it): the "
        "anchor was moved without a checkpointed record of the move")
    root.path(*FOLDER, checkpoint_name(13, moved=True)).unlink()
    assert fails(log, root, own) == (
        "the log continues in own from checkpoint 16, but no bucket given holds a "
        "checkpointed record of the anchor moving there: the anchor was moved silently")


def _rename(log: Log, anchor: Anchor, size: int, describe: Any) -> None:
    """The JSON checkpoint ``size`` of ``anchor`` signed again naming ``describe``."""
    path = anchor.path(*FOLDER, checkpoint_name(size))
    body = json.loads(path.read_bytes())
    if describe is None:
        body.pop("anchor")
    else:
        body["anchor"] = describe
    path.write_bytes(log.sign_json(body))


def test_a_place_is_what_its_latest_signed_checkpoint_says(log: Log, root: Anchor,
                                                           own: Anchor, tmp_path: Path) -> None:
    moved(log, root, own)
    elsewhere = tenant_anchor(tmp_path, "elsewhere").describe()
    _rename(log, own, 20, elsewhere)  # the latest names another place: own is not the target
    assert fails(log, root, own).endswith("which was not given: pass that bucket with "
                                          "another --bucket so the rest of the log is checked")
    _rename(log, own, 20, None)  # a checkpoint naming no place is passed over
    assert verify(log, root, own).moves == 1
    path = own.path(*FOLDER, checkpoint_name(20))
    body = json.loads(log.sign_json({**json.loads(path.read_bytes()), "anchor": elsewhere}))
    body["signature"] = Log().key.sign(body)  # and so is one the log did not sign
    path.write_text(json.dumps(body))
    assert verify(log, root, own).moves == 1
    path.write_text("[]")
    assert verify(log, root, own).moves == 1


def test_a_checkpoint_in_a_folder_below_names_no_place(log: Log, root: Anchor,
                                                       own: Anchor) -> None:
    moved(log, root, own)
    for size in (16, 20):
        path = own.path(*FOLDER, checkpoint_name(size))
        own.put((*FOLDER, "copies", checkpoint_name(size)), path.read_bytes())
        path.unlink()
    assert fails(log, root, own).endswith("which was not given: pass that bucket with "
                                          "another --bucket so the rest of the log is checked")


def test_a_move_record_naming_no_place_is_refused(log: Log, root: Anchor, own: Anchor) -> None:
    moved(log, root, own)
    record(log, root, root, own, 13, moved_to="own")
    assert fails(log, root, own) == "a move record in root names no place it moved to"


def _where(own: Anchor) -> str:
    return f"root records that the anchor moved to {offline.label(own.place, own.config_id)}"


@pytest.mark.parametrize("tamper", [
    "no_size", "size_none", "seq_text", "junk_leaf", "junk_hash", "hashes_a_number",
    "leaf_not_json", "non_ascii_leaf",
])
def test_a_malformed_proof_of_a_move_is_refused(log: Log, root: Anchor, own: Anchor,
                                                tamper: str) -> None:
    moved(log, root, own)
    good = evidence(log, 13, 13)
    tlog: dict[str, Any] = {
        "no_size": {k: v for k, v in good.items() if k != "size"},
        "size_none": {**good, "size": None},
        "seq_text": {**good, "seq": "x"},
        "junk_leaf": {**good, "leaf": "!" + good["leaf"]},
        "junk_hash": {**good, "hashes": ["!" + h for h in good["hashes"]]},
        "hashes_a_number": {**good, "hashes": 5},
        "leaf_not_json": {**good, "leaf": b64(b"\xff")},
        "non_ascii_leaf": {**good, "leaf": "é" + good["leaf"]},
    }[tamper]
    record(log, root, root, own, 13, tlog=tlog)
    assert fails(log, root, own) == f"{_where(own)} at row 13, but its proof is not well formed"
    record(log, root, root, own, 13, tlog=good)
    assert verify(log, root, own).moves == 1


def test_a_move_proven_in_a_checkpoint_its_place_lacks_is_refused(log: Log, root: Anchor,
                                                                  own: Anchor) -> None:
    moved(log, root, own)
    for size in (16, 99):  # in the other place, in none
        record(log, root, root, own, 13, tlog={**evidence(log, 13, 16), "size": size})
        assert fails(log, root, own) == (
            f"{_where(own)} at row 13, proven in its checkpoint {size}, which is not there: "
            "checkpoints were deleted")


def test_a_move_whose_proof_does_not_verify_is_refused(log: Log, root: Anchor,
                                                       own: Anchor) -> None:
    moved(log, root, own)
    sentence = (f"{_where(own)} at row 13, but that row is not in its checkpoint 13: the proof "
                "does not verify")
    for tlog in ({**evidence(log, 13, 13), "seq": 12},
                 {**evidence(log, 13, 13), "leaf": b64(log.leaves[11])},
                 {**evidence(log, 12, 13), "seq": 13}):
        record(log, root, root, own, 13, tlog=tlog)
        assert fails(log, root, own) == sentence


@pytest.mark.parametrize("row", [
    [13, MOVE_OPERATION],
    {"seq": 13, "operation": "memory_read", "detail": "<detail>"},
    {"seq": 12, "operation": MOVE_OPERATION, "detail": "<detail>"},
    {"seq": 13, "operation": MOVE_OPERATION, "detail": "audit checkpoints move elsewhere"},
])
def test_a_move_proving_another_row_is_refused(log: Log, root: Anchor, own: Anchor,
                                               row: Any) -> None:
    three(log, root)
    detail = move_detail(own.place, own.config_id)
    if isinstance(row, dict) and row["detail"] == "<detail>":
        row = {**row, "detail": detail}
    log.leaves.append(json.dumps(row).encode())
    checkpoint(log, root, 13, 12)
    checkpoint(log, own, 13, None)
    record(log, root, root, own, 13)
    assert fails(log, root, own) == (f"{_where(own)} at row 13, but the row proven is not "
                                     f"that move's {MOVE_OPERATION} row")
    log.leaves[12] = json.dumps({"seq": 13, "operation": MOVE_OPERATION,
                                 "detail": detail}).encode()
    checkpoint(log, root, 13, 12)
    checkpoint(log, own, 13, None)
    record(log, root, root, own, 13)
    assert verify(log, root, own).moves == 1


# -- the log across places -------------------------------------------------------------------


def test_a_silent_return_to_the_first_place_is_named(log: Log, root: Anchor,
                                                     own: Anchor) -> None:
    moved(log, root, own)
    checkpoint(log, root, log.append(n=5), 20)
    assert fails(log, root, own) == (
        "the log goes on from checkpoint 20 in own to checkpoint 25 in root without a "
        "checkpointed record of the anchor moving: the anchor was moved silently")


def test_a_silent_move_into_a_third_place_is_named(log: Log, root: Anchor, own: Anchor,
                                                   tmp_path: Path) -> None:
    moved(log, root, own)
    other = tenant_anchor(tmp_path, "other")
    checkpoint(log, other, log.append(n=5), 20)
    assert fails(log, root, own, other) == (
        "the log continues in other from checkpoint 25, but no bucket given holds a "
        "checkpointed record of the anchor moving there: the anchor was moved silently")


def test_a_move_out_of_a_place_that_took_no_more_writes_is_recorded_in_the_first(
        log: Log, root: Anchor, own: Anchor, tmp_path: Path) -> None:
    moved(log, root, own)
    later = tenant_anchor(tmp_path, "later")
    seq = log.append(MOVE_OPERATION, move_detail(later.place, later.config_id))
    checkpoint(log, root, seq, 20)  # the root, not the unwritable place, holds it
    record(log, root, own, later, seq)
    checkpoint(log, later, log.append(n=3), seq)
    sizes = (3, 7, 12, 13, 16, 20, 21, 24)
    assert verify(log, root, own, later) == offline.Verified(
        log.origin, 8, 3, 24, log.root(24), 3, 2, 7,
        tuple((size, log.root(size)) for size in sizes))
    root.path(*FOLDER, checkpoint_name(seq, moved=True)).unlink()
    assert fails(log, root, own, later) == (
        "the log continues in later from checkpoint 24, but no bucket given holds a "
        "checkpointed record of the anchor moving there: the anchor was moved silently")


def test_two_places_moving_into_each_other_are_not_reached_from_the_first(
        log: Log, root: Anchor, tmp_path: Path) -> None:
    """Moves from a to b and from b to a, each proven in its own place's checkpoint 14:
    neither leaves the root."""
    a, b = tenant_anchor(tmp_path, "a"), tenant_anchor(tmp_path, "b")
    three(log, root)
    log.append(MOVE_OPERATION, move_detail(b.place, b.config_id))
    log.append(MOVE_OPERATION, move_detail(a.place, a.config_id))
    for place in (a, b):
        checkpoint(log, place, 14, 12)
    record(log, a, a, b, 13, size=14)
    record(log, b, b, a, 14, size=14)
    assert fails(log, root, a, b) == (
        "the log goes on from checkpoint 12 in root to checkpoint 14 in a and b without a "
        "checkpointed record of the anchor moving: the anchor was moved silently")


def test_a_jump_between_two_places_each_entered_by_a_move_is_named(
        log: Log, root: Anchor, tmp_path: Path) -> None:
    """The root moves the anchor to a (row 13), then to b (row 14); the log goes on in a,
    then jumps to b on the strength of the older move."""
    a, b = tenant_anchor(tmp_path, "a"), tenant_anchor(tmp_path, "b")
    three(log, root)
    for seq, place in ((13, a), (14, b)):
        log.append(MOVE_OPERATION, move_detail(place.place, place.config_id))
        checkpoint(log, root, seq, seq - 1)
        record(log, root, root, place, seq)
        place.put(offline.checkpoint_path(seq), log.note(seq))
    checkpoint(log, a, log.append(n=2), 14)
    checkpoint(log, b, log.append(n=4), 16)
    assert fails(log, root, a, b) == (
        "the log goes on from checkpoint 16 in a to checkpoint 20 in b without a checkpointed "
        "record of the anchor moving: the anchor was moved silently")
    b.path(*offline.checkpoint_path(20)).unlink()
    b.path(*offline.consistency_path(16, 20)).unlink()
    verified = verify(log, root, a, b)
    assert (verified.checkpoints, verified.moves, verified.last_size) == (6, 2, 16)
