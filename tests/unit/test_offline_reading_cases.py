"""``offline.verify`` reading one place: the exact report of a good log, what it ignores
beside the checkpoints, and the sentence of each file someone with write access to the bucket
(but not the log's key) can put there — renamed, oversized, unsigned, malformed — and of each
checkpoint or proof taken away. Local directories, no database, no server."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.audit import offline
from control_plane.audit.anchors import FOLDER
from control_plane.tlog import note
from storage_adapters.local import LocalAdapter
from tests.unit.offline_logs import (
    Anchor,
    Log,
    b64,
    checkpoint,
    fails,
    root_anchor,
    three,
    verify,
)

CEILING = 65536  # FILE_CEILING, written out: 1 << 16


@pytest.fixture
def log() -> Log:
    return Log()


@pytest.fixture
def root(tmp_path: Path, log: Log) -> Anchor:
    return root_anchor(tmp_path, log.tenant_id)


def test_the_names_of_a_logs_files(log: Log, tmp_path: Path) -> None:
    tlog = "audit/checkpoints/tlog"
    assert offline.note_name(12) == "00000000000000000012"
    assert "/".join(offline.checkpoint_path(12)) == f"{tlog}/checkpoint/00000000000000000012"
    assert "/".join(offline.consistency_path(3, 12)) == (
        f"{tlog}/consistency/00000000000000000003-00000000000000000012")
    assert offline.origin_of("memplane", log.tenant_id) == f"memplane/audit/{log.tenant_id}"
    adapter = LocalAdapter(tmp_path)
    assert offline.Bucket("b", adapter, "/tenants/x/").path("audit", "", "c") == \
        "tenants/x/audit/c"
    assert offline.Bucket("b", adapter).path(*FOLDER) == "audit/checkpoints"
    assert offline.Bucket("b", adapter).prefix == ""


def test_a_good_log_verifies_to_its_exact_report(log: Log, root: Anchor,
                                                 tmp_path: Path) -> None:
    assert three(log, root) == [3, 7, 12]
    expected = offline.Verified(
        log.origin, 3, 3, 12, log.root(12), 1, 0, 2,
        ((3, log.root(3)), (7, log.root(7)), (12, log.root(12))))
    assert verify(log, root) == expected
    assert verify(log, root, tenant=False) == expected
    # a bucket read at a prefix
    whole = offline.Bucket("operator", LocalAdapter(tmp_path), "/root/")
    assert offline.verify([whole], log.signer.verifier) == expected
    assert expected.summary() == {
        "ok": True, "origin": log.origin, "checkpoints": 3, "first_size": 3, "last_size": 12,
        "last_root": b64(log.root(12)), "places": 1, "moves": 0, "consistency_proofs": 2}
    head = offline.Head(3, log.root(3), log.origin)
    for frozen, name in ((expected, "moves"), (head, "size"), (whole, "prefix")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, name, 1)


def test_no_bucket_and_empty_buckets_are_refused(log: Log, tmp_path: Path) -> None:
    with pytest.raises(offline.Failure) as failed:
        offline.verify([], log.signer.verifier)
    assert str(failed.value) == "no bucket was given"
    empty = [offline.Bucket(name, LocalAdapter(tmp_path / name)) for name in ("a", "b")]
    with pytest.raises(offline.Failure) as failed:
        offline.verify(empty, log.signer.verifier)
    assert str(failed.value) == ("a and b hold no checkpoint of the audit log (nothing under "
                                 "audit/checkpoints/tlog/checkpoint/)")


def test_files_beside_the_checkpoints_are_ignored(log: Log, root: Anchor) -> None:
    three(log, root)
    moved = {"moved_to": {"storage_type": "s3", "bucket": "x", "endpoint": None,
                          "prefix": "p", "storage_config_id": None}}
    for parts, data in (
            (("tlog", "checkpoint", "old", "00000000000000000099"), "junk"),
            (("tlog", "elsewhere", "00000000000000000099"), "junk"),
            (("tlog", "readme"), "junk"),
            (("old", "00000000000000000013-moved.json"), log.sign_json(moved)),
            (("notes.txt",), "junk"),
            (("garbage.json",), b"\xff{"),
            (("list.json",), "[1, 2]"),
            (("00000000000000000001-moved.json",), "[1]"),
            (("00000000000000000002-moved.json",), "not json"),
            (("00000000000000000003-moved.json",), log.sign_json({"anchor": None})),
    ):
        root.put((*FOLDER, *parts), data)
    assert verify(log, root).checkpoints == 3


def _signed(log: Log, **changes: object) -> bytes:
    """A move record to a place not given, signed, then changed by ``changes``."""
    body = json.loads(log.sign_json({
        "seq": 12, "moved_to": {"storage_type": "s3", "bucket": "x", "endpoint": None,
                                "prefix": "p", "storage_config_id": None}}))
    body.update(changes)
    return json.dumps(body).encode()


def _resigned(log: Log, **changes: object) -> bytes:
    """The move record of ``_signed`` changed and signed again by the log's key."""
    body = {**json.loads(_signed(log)), **changes}
    body["signature"] = log.key.sign(body)
    return json.dumps(body).encode()


@pytest.mark.parametrize("tamper", [
    "format", "key_id", "other_key", "int_signature", "junk_signature",
    "non_ascii_signature", "short_signature", "no_signature", "list", "not_utf8",
])
def test_move_records_the_log_did_not_sign_are_not_read(log: Log, root: Anchor,
                                                        tamper: str) -> None:
    """Each would fail the log (a move to a place not given) if it were read as a move."""
    three(log, root)
    good = json.loads(_signed(log))
    signature = good["signature"]
    data = {
        "format": lambda: _resigned(log, format="memplane-audit-checkpoint/2"),
        "key_id": lambda: _signed(log, key_id=Log().key.key_id),
        "other_key": lambda: _signed(log, signature=Log().key.sign(good)),
        "int_signature": lambda: _signed(log, signature=12),
        "junk_signature": lambda: _signed(log, signature="!" + signature),
        "non_ascii_signature": lambda: _signed(log, signature="é" + signature),
        "short_signature": lambda: _signed(log, signature=b64(b"short")),
        "no_signature": lambda: json.dumps({k: v for k, v in good.items()
                                            if k != "signature"}).encode(),
        "list": lambda: json.dumps([good]).encode(),
        "not_utf8": lambda: b"\xff" + _signed(log),
    }[tamper]()
    root.put((*FOLDER, "00000000000000000012-moved.json"), data)
    assert verify(log, root).moves == 0
    root.put((*FOLDER, "00000000000000000012-moved.json"), _signed(log))
    assert fails(log, root).startswith("root records that the anchor moved to storage "
                                       "configuration (unknown) at row 12, but the move is "
                                       "not in the log")


def test_a_file_up_to_the_ceiling_is_read_and_one_byte_more_is_refused(
        log: Log, root: Anchor) -> None:
    three(log, root)
    proof = root.path(*offline.consistency_path(3, 7))
    body = proof.read_bytes()
    proof.write_bytes(body + b" " * (CEILING - len(body)))
    assert verify(log, root).proofs == 2
    proof.write_bytes(body + b" " * (CEILING + 1 - len(body)))
    assert fails(log, root) == ("the consistency proof from 3 to 7 in root is larger than any "
                                "the server writes: it was altered")
    proof.write_bytes(body)
    named = root.path(*FOLDER, "00000000000000000012.json")
    body = named.read_bytes()
    named.write_bytes(body + b" " * (CEILING - len(body)))
    assert verify(log, root).proofs == 2
    named.write_bytes(body + b" " * (CEILING + 1 - len(body)))
    assert fails(log, root) == ("00000000000000000012.json in root is larger than any the "
                                "server writes: it was altered")
    named.write_bytes(body)
    signed = root.path(*offline.checkpoint_path(12))
    signed.write_bytes(signed.read_bytes() + b"\n" * CEILING)
    assert fails(log, root) == ("checkpoint 00000000000000000012 in root is larger than any "
                                "the server writes: it was altered")


def test_a_note_that_is_not_text_or_not_signed_by_the_log_is_altered(log: Log,
                                                                     root: Anchor) -> None:
    three(log, root)
    root.put(offline.checkpoint_path(12), b"\xff\xfe")
    assert fails(log, root) == ("checkpoint 00000000000000000012 in root is not a signed "
                                "note: it was altered")
    root.put(offline.checkpoint_path(12),
             log.note(12, note.Signer(log.name, Ed25519PrivateKey.generate())))
    assert fails(log, root) == (
        "checkpoint 00000000000000000012 in root does not carry a valid signature of the "
        "log's key memplane (the note carries no signature of memplane): it was forged, "
        "altered or signed by another key")


def test_a_note_under_another_size_is_renamed_and_a_smaller_one_goes_down(
        log: Log, root: Anchor) -> None:
    three(log, root)
    root.put(offline.checkpoint_path(9), log.note(7))
    assert fails(log, root) == ("checkpoint 00000000000000000009 in root holds a tree of 7 "
                                "rows, not 9: the file was renamed or replaced")
    root.put(offline.checkpoint_path(9), log.note(6))
    assert fails(log, root) == ("checkpoint 00000000000000000009 in root holds a tree of 6 "
                                "rows, fewer than the checkpoint before it (7): the log's "
                                "size went down")


@pytest.mark.parametrize(("kind", "name", "what"), [
    ("checkpoint", "12", "a tree size: the checkpoints"),
    ("checkpoint", "0000000000000000001a", "a tree size: the checkpoints"),
    ("consistency", "00000000000000000003", "two tree sizes: the proofs"),
    ("consistency", "3-7", "two tree sizes: the proofs"),
    ("consistency", "00000000000000000003-0000000000000000007x", "two tree sizes: the proofs"),
])
def test_a_file_not_named_by_sizes_is_tampering(log: Log, root: Anchor, kind: str, name: str,
                                                what: str) -> None:
    three(log, root)
    root.put((*FOLDER, "tlog", kind, name), "x")
    path = f"audit/checkpoints/tlog/{kind}/{name}"
    assert fails(log, root) == f"root holds {path}, which is not named by {what} were " \
                               "tampered with"


def test_checkpoints_of_other_logs_are_refused(log: Log, root: Anchor) -> None:
    three(log, root)
    other = Log(key=log.key)
    assert fails(other, root) == (f"the checkpoints are of the log {log.origin}, not of "
                                  f"tenant {other.tenant_id}")
    other.append(n=20)
    root.put(offline.checkpoint_path(20), other.note(20))
    first, second = sorted((log.origin, other.origin))
    assert fails(log, root, tenant=False) == (
        f"the checkpoints name 2 different logs ({first}, {second}): checkpoints of another "
        "log were put among these")


def test_the_first_checkpoint_must_be_in_the_first_bucket(log: Log, root: Anchor,
                                                          tmp_path: Path) -> None:
    three(log, root)
    later = Anchor(tmp_path / "later", root.place, None)
    for size, previous in ((7, None), (12, 7)):
        checkpoint(log, later, size, previous)
    assert fails(log, later, root) == ("the log's first checkpoint (3) is in root, not in "
                                       "later: give the bucket where the log starts first")
    assert fails(log, later, Anchor(tmp_path / "none", root.place, None), root) == (
        "the log's first checkpoint (3) is in root, not in later: give the bucket where the "
        "log starts first")
