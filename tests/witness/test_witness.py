"""The witness (control_plane/tlog/witness.py): it cosigns one history of a log and refuses
every fork of it, before and after a restart, answering as C2SP tlog-witness says."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.tlog import merkle, note
from control_plane.tlog.witness import (
    SIZE_TYPE,
    STATE_FILE,
    Answer,
    Cosigned,
    State,
    Witness,
    WitnessError,
    cosigner_verifier,
    new_key,
    parse_key,
    parse_log_key,
    request_body,
)

from .logs import ORIGIN, Log, new_log

NOW = 1_767_225_600


@pytest.fixture
def log() -> Log:
    return new_log()


@pytest.fixture
def signer() -> note.Signer:
    return parse_key(new_key("witness.example.com/w1"))


def start(signer: note.Signer, log: Log, directory: Path) -> Witness:
    return Witness(signer, [parse_log_key(log.vkey)], State(directory), clock=lambda: NOW)


@pytest.fixture
def witness(signer: note.Signer, log: Log, tmp_path: Path) -> Iterator[Witness]:
    w = start(signer, log, tmp_path / "state")
    yield w
    w.state.close()


def cosigned(log: Log, size: int, answer: Answer) -> str:
    assert (answer.status, answer.content_type) == (200, "text/plain; charset=utf-8")
    return log.checkpoint(size) + answer.body


def test_a_valid_extension_is_cosigned_and_the_cosignature_verifies_with_the_vkey(
        witness: Witness, log: Log) -> None:
    vkey = note.parse_verifier(witness.verifier.text())
    assert vkey.kind == note.COSIGNATURE
    first = cosigned(log, 5, witness.add_checkpoint(log.request(0, 5)))
    assert note.verify_cosignature(first, vkey) == NOW
    extended = witness.add_checkpoint(log.request(5, 9))
    assert extended.body.startswith("\u2014 witness.example.com/w1 ")
    assert extended.body.count("\n") == 1
    both = cosigned(log, 9, extended)
    assert note.verify_cosignature(both, vkey) == NOW
    assert note.verify(both, log.signer.verifier) == note.parse(log.checkpoint(9)).text
    # The same checkpoint again (same size, same root) is cosigned again.
    assert witness.add_checkpoint(log.request(9, 9)).status == 200
    assert witness.state.get(ORIGIN) == Cosigned(9, log.root(9))


def test_a_fork_is_refused_and_still_refused_after_a_restart(
        witness: Witness, signer: note.Signer, log: Log, tmp_path: Path) -> None:
    fork = log.fork(6)
    assert fork.root(6) == log.root(6) and fork.root(8) != log.root(8)
    assert witness.add_checkpoint(log.request(0, 4)).status == 200
    assert witness.add_checkpoint(log.request(4, 8)).status == 200

    def refusals(w: Witness) -> list[tuple[int, str, str]]:
        answers = [
            # the fork's head, with its own (valid for the fork) proof from the shared 8
            w.add_checkpoint(fork.request(8, 10)),
            # the fork at the very size the witness holds: same size, another root
            w.add_checkpoint(fork.request(8, 8)),
            # the fork claiming the witness is still at the shared prefix
            w.add_checkpoint(fork.request(6, 10)),
            # the fork from the start
            w.add_checkpoint(fork.request(0, 10)),
        ]
        return [(a.status, a.content_type, a.body) for a in answers]

    expected = [(422, "text/plain; charset=utf-8", "the consistency proof does not verify\n"),
                (409, SIZE_TYPE, "8\n"), (409, SIZE_TYPE, "8\n"), (409, SIZE_TYPE, "8\n")]
    assert refusals(witness) == expected
    evidence = sorted(p.name for p in (witness.state.directory / "evidence").iterdir())
    assert len(evidence) == 2  # the two the log signed that contradict what was cosigned

    witness.state.close()
    restarted = start(signer, log, tmp_path / "state")
    try:
        assert restarted.state.get(ORIGIN).size == 8
        assert refusals(restarted) == expected
        assert restarted.add_checkpoint(log.request(8, 12)).status == 200
        assert refusals(restarted)[0][0] == 409  # now at 12, the fork's "old 8" conflicts
    finally:
        restarted.state.close()


def test_a_proof_of_another_history_is_refused(witness: Witness, log: Log) -> None:
    assert witness.add_checkpoint(log.request(0, 5)).status == 200
    other = log.fork(0, "other")
    body = request_body(5, other.proof(5, 9), log.checkpoint(9))
    answer = witness.add_checkpoint(body)
    assert (answer.status, answer.body) == (422, "the consistency proof does not verify\n")
    short = request_body(5, log.proof(5, 9)[:-1], log.checkpoint(9))
    assert witness.add_checkpoint(short).status == 422
    assert witness.state.get(ORIGIN).size == 5


def test_a_checkpoint_no_trusted_key_signed_is_forbidden(witness: Witness, log: Log) -> None:
    impostor = Log(note.Signer("memplane", Ed25519PrivateKey.generate()), log.leaves)
    answer = witness.add_checkpoint(impostor.request(0, 5))
    assert (answer.status, answer.body) == (
        403, "no signature of a trusted key of this log verifies\n")
    # The right key's signature line under another checkpoint's text.
    tampered = log.checkpoint(5).replace("\n5\n", "\n6\n", 1)
    assert witness.add_checkpoint(request_body(0, [], tampered)).status == 403
    # Unknown keys beside a trusted one are ignored.
    both = Log(log.signer, log.leaves, extra_signers=(impostor.signer,))
    assert witness.add_checkpoint(both.request(0, 5)).status == 200


def test_an_unknown_origin_is_not_found(witness: Witness) -> None:
    stranger = new_log(name="other-log", origin="other-log/audit/x")
    answer = witness.add_checkpoint(stranger.request(0, 3))
    assert (answer.status, answer.body) == (404, "this witness knows no log of that origin\n")
    # A key named "memplane" covers memplane and memplane/…, not memplane-two/….
    lookalike = new_log(origin="memplane-two/audit/x")
    assert witness.add_checkpoint(lookalike.request(0, 3)).status == 404


@pytest.mark.parametrize(("body", "sentence"), [
    (b"", "the body reads 'old <size>', proof lines, a blank line, then the checkpoint"),
    (b"old 01\n\n", "the first line reads 'old <size>', in decimal without leading zeros"),
    (b"old -1\n\n", "the first line reads 'old <size>', in decimal without leading zeros"),
    (b"new 0\n\n", "the first line reads 'old <size>', in decimal without leading zeros"),
    (b"old 0\nnot-base64\n\n", "each proof line is one base64 SHA-256 hash"),
    (b"old 0\nAAAA\n\n", "each proof line is one base64 SHA-256 hash"),
    (b"old 0\n" + b"A" * 43 + b"=\n" * 64 + b"\n", "a consistency proof has at most 63 lines"),
    (b"old 0\n\xff\n\n", "the request body is not UTF-8"),
    (b"old 0\n\n" + b"x" * 70_000, "the request body is too large"),
    (b"old 0\n\nno signature\n\n", "the note carries no signature"),
    (b"old 0\n\norigin\n\nbad line\n", "a signature line reads '\u2014 <name> <base64>'"),
    ("old 0\n\norigin\n\n\u2014 k AAAAAAAA\n".encode(),
     "a checkpoint reads its origin, size and root hash, one a line"),
])
def test_malformed_requests_are_bad_requests(witness: Witness, body: bytes,
                                             sentence: str) -> None:
    assert witness.add_checkpoint(body) == Answer(400, sentence + "\n")


def test_an_old_size_above_the_checkpoint_is_a_bad_request(witness: Witness,
                                                           log: Log) -> None:
    answer = witness.add_checkpoint(request_body(6, [], log.checkpoint(5)))
    assert answer == Answer(400, "the old size is above the checkpoint's size\n")


def test_a_proof_from_zero_must_be_empty(witness: Witness, log: Log) -> None:
    assert witness.add_checkpoint(request_body(0, log.proof(2, 5), log.checkpoint(5))).status \
        == 422


def test_the_state_is_replaced_whole_and_a_damaged_one_stops_the_start(
        witness: Witness, log: Log, signer: note.Signer, tmp_path: Path) -> None:
    assert witness.add_checkpoint(log.request(0, 3)).status == 200
    directory = witness.state.directory
    saved = json.loads((directory / STATE_FILE).read_text())
    assert saved["logs"] == {ORIGIN: {"size": 3, "root": note.Checkpoint(
        ORIGIN, 3, log.root(3)).text().split("\n")[2]}}
    assert sorted(p.name for p in directory.iterdir()) == ["lock", STATE_FILE]
    assert os.stat(directory / STATE_FILE).st_mode & 0o777 == 0o600
    with pytest.raises(WitnessError, match="another witness process holds"):
        State(directory)
    witness.state.close()
    (directory / STATE_FILE).write_text('{"format": "memplane-witness-state/1", "logs": {"x"')
    with pytest.raises(WitnessError, match="cannot be read; restore it from a backup"):
        State(directory)
    (directory / STATE_FILE).unlink()  # the failed start released the lock:
    State(directory).close()


def test_keys_round_trip_and_a_damaged_key_is_refused() -> None:
    text = new_key("witness.example.com/w1")
    signer = parse_key(text)
    assert text.startswith("PRIVATE+KEY+witness.example.com/w1+")
    verifier = cosigner_verifier(signer)
    assert verifier.text().split("+")[1] == text.split("+")[3]
    assert note.parse_verifier(verifier.text()) == verifier
    name, hex_id, key = text.removeprefix("PRIVATE+KEY+").split("+", 2)
    with pytest.raises(WitnessError, match="id does not match"):
        parse_key(f"PRIVATE+KEY+other+{hex_id}+{key}")
    with pytest.raises(WitnessError, match="not an Ed25519 cosignature key"):
        parse_key(f"PRIVATE+KEY+{name}+{hex_id}+{'AQ' + key[2:]}")
    with pytest.raises(WitnessError, match="reads PRIVATE"):
        parse_key(verifier.text())
    with pytest.raises(WitnessError, match="must be an Ed25519 signed-note key"):
        parse_log_key(verifier.text())


def test_a_second_witness_cosigns_independently(log: Log, tmp_path: Path) -> None:
    first = start(parse_key(new_key("w1")), log, tmp_path / "one")
    second = start(parse_key(new_key("w2")), log, tmp_path / "two")
    try:
        lines = [w.add_checkpoint(log.request(0, 7)).body for w in (first, second)]
        note_text = log.checkpoint(7) + "".join(lines)
        for w in (first, second):
            assert note.verify_cosignature(note_text, w.verifier) == NOW
    finally:
        first.state.close()
        second.state.close()


def test_an_empty_log_and_its_first_checkpoint(witness: Witness, log: Log) -> None:
    empty = note.sign(note.Checkpoint(ORIGIN, 0, merkle.EMPTY_ROOT).text(), log.signer)
    assert witness.add_checkpoint(request_body(0, [], empty)).status == 200
    assert witness.add_checkpoint(log.request(0, 1)).status == 200


def test_a_state_that_cannot_be_written_is_not_cosigned(
        witness: Witness, log: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    assert witness.add_checkpoint(log.request(0, 4)).status == 200
    saved = (witness.state.directory / STATE_FILE).read_bytes()

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    refused = witness.add_checkpoint(log.request(4, 9))
    assert refused == Answer(503, "the witness could not record the checkpoint; retry\n")
    assert (witness.state.directory / STATE_FILE).read_bytes() == saved
    assert sorted(p.name for p in witness.state.directory.iterdir()) == ["lock", STATE_FILE]
    monkeypatch.undo()
    assert witness.state.get(ORIGIN).size == 4
    assert witness.add_checkpoint(log.request(4, 9)).status == 200
