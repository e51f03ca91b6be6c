"""C2SP signed notes, checkpoints and cosignatures: what is signed verifies, and nothing
else does."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.tlog import note


def signer(name: str) -> note.Signer:
    return note.Signer(name, Ed25519PrivateKey.generate())


def test_a_signed_checkpoint_verifies_with_its_key_and_its_text_round_trips() -> None:
    log = signer("memplane.example/audit")
    checkpoint = note.Checkpoint("memplane.example/audit/t1", 12, bytes(range(32)))
    signed = note.sign(checkpoint.text(), log)
    assert signed.startswith("memplane.example/audit/t1\n12\n"
                             "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n\n\u2014 "
                             "memplane.example/audit ")
    vkey = log.verifier.text()
    assert note.parse_checkpoint(note.verify(signed, note.parse_verifier(vkey))) == checkpoint


def test_a_changed_text_a_foreign_key_or_a_forged_id_fail() -> None:
    log, other = signer("log"), signer("log")
    signed = note.sign("origin\n1\n" + "A" * 43 + "=\n", log)
    with pytest.raises(note.NoteError, match="does not verify"):
        note.verify(signed.replace("\n1\n", "\n2\n"), log.verifier)
    with pytest.raises(note.NoteError, match="no signature of log"):
        note.verify(signed, other.verifier)
    vkey = log.verifier.text()
    name, key_id, key = vkey.split("+", 2)
    with pytest.raises(note.NoteError, match="id does not match"):
        note.parse_verifier(f"{name}+{'00000000' if key_id != '00000000' else '11111111'}+{key}")


def test_a_witness_cosignature_verifies_only_for_its_checkpoint() -> None:
    log, witness = signer("log"), signer("witness.example")
    text = note.Checkpoint("origin", 3, bytes(32)).text()
    signed = note.sign(text, log)
    cosigned = note.Note(text, (*note.parse(signed).signatures,
                                note.cosign(text, witness, 1_700_000_000))).render()
    verifier = note.Verifier(witness.name, witness.private.public_key(), note.COSIGNATURE)
    assert note.verify_cosignature(cosigned, verifier) == 1_700_000_000
    assert note.parse_verifier(verifier.text()) == verifier
    assert note.verify(cosigned, log.verifier) == text
    forged = cosigned.replace("\n3\n", "\n4\n")
    with pytest.raises(note.NoteError):
        note.verify_cosignature(forged, verifier)


@pytest.mark.parametrize("text", ["no newline", "a\x01b\n", "a\rb\n", "", "origin\n-1\nAAAA\n"])
def test_malformed_notes_and_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(note.NoteError):
        note.parse_checkpoint(text) if text.startswith("origin") else note.sign(text,
                                                                                  signer("k"))
