"""C2SP signed notes, checkpoints and cosignatures against published vectors: the keys, notes
and malformed inputs of golang.org/x/mod/sumdb/note (the Go checksum database), the checkpoints
and key pairs of transparency-dev/formats (with a real checkpoint of sum.golang.org), and the
examples of the C2SP specifications. Our key ids and verifier keys are theirs, signing their
text with their private keys gives their signature bytes (Ed25519 is deterministic), their
notes verify with their keys, and what they refuse we refuse. Sources:
``tests/tlog/vectors/README.md``."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.tlog import merkle, note

HERE = Path(__file__).parent / "vectors"


def load(name: str) -> dict[str, Any]:
    return dict(json.loads((HERE / name).read_text()))


GO = load("golang-mod-sumdb.json")
FORMATS = load("transparency-dev-formats.json")
C2SP = load("c2sp.json")
TEXT = GO["text"]
ROOT32 = base64.b64encode(bytes(range(32))).decode()


def signer_from_go_skey(skey: str) -> note.Signer:
    """A signer from golang.org/x/mod's private key text, PRIVATE+KEY+<name>+<id>+<base64(0x01
    ‖ seed)> (the id it states is checked by the tests, through the verifier key)."""
    prefix, key, name, _, encoded = skey.split("+", 4)
    raw = base64.b64decode(encoded)
    assert (prefix, key, raw[0], len(raw)) == ("PRIVATE", "KEY", note.ED25519, 33)
    return note.Signer(name, Ed25519PrivateKey.from_private_bytes(raw[1:]))


PETER = signer_from_go_skey(GO["keys"]["PeterNeumann"]["skey"])
ENOCH = note.Signer("EnochRoot", Ed25519PrivateKey.from_private_bytes(
    bytes.fromhex(GO["keys"]["EnochRoot"]["seed_hex"])))
PAIRS = FORMATS["key_pairs"]["pairs"]
SUMDB = FORMATS["sum_golang_org"]

PUBLISHED_VKEYS = [GO["keys"]["PeterNeumann"]["vkey"], GO["keys"]["EnochRoot"]["vkey"],
                   *(pair["vkey"] for pair in PAIRS), SUMDB["vkey"],
                   *SUMDB["more_signers"]["vkeys"], C2SP["signed_note_example"]["vkey"],
                   FORMATS["cosignature_vkeys"]["ed25519"],
                   FORMATS["cosignature_vkeys"]["cosignature_v1"]]


# --- keys ---------------------------------------------------------------------------------


def test_the_published_private_keys_give_the_published_verifier_keys() -> None:
    assert PETER.verifier.text() == GO["keys"]["PeterNeumann"]["vkey"]
    assert ENOCH.verifier.text() == GO["keys"]["EnochRoot"]["vkey"]
    for pair in PAIRS:
        assert signer_from_go_skey(pair["skey"]).verifier.text() == pair["vkey"]
    for skey in [GO["keys"]["PeterNeumann"]["skey"], *(pair["skey"] for pair in PAIRS)]:
        assert signer_from_go_skey(skey).verifier.id.hex() == skey.split("+")[3]


@pytest.mark.parametrize("vkey", PUBLISHED_VKEYS)
def test_every_published_verifier_key_parses_with_its_key_id_and_prints_back(vkey: str) -> None:
    verifier = note.parse_verifier(vkey)
    name, hex_id, _ = vkey.split("+", 2)
    assert (verifier.name, verifier.id.hex(), verifier.text()) == (name, hex_id, vkey)


def test_a_native_cosignature_key_is_type_4_and_an_ed25519_key_type_1() -> None:
    keys = FORMATS["cosignature_vkeys"]
    assert note.parse_verifier(keys["cosignature_v1"]).kind == note.COSIGNATURE
    assert note.parse_verifier(keys["ed25519"]).kind == note.ED25519


def _manglings(vkey: str) -> list[str]:
    """golang.org/x/mod's TestNewVerifier: every proper substring, every one-byte increment."""
    cut = [vkey[i:j] for i in range(len(vkey) + 1) for j in range(i + 1, len(vkey) + 1)
           if (i, j) != (0, len(vkey))]
    bumped = [vkey[:i] + chr(ord(vkey[i]) + 1) + vkey[i + 1:] for i in range(len(vkey))]
    return cut + bumped


def test_every_mangling_of_a_published_verifier_key_is_refused() -> None:
    bad = [*_manglings(GO["keys"]["PeterNeumann"]["vkey"]), *GO["bad_vkeys"]["vkeys"],
           *FORMATS["cosignature_vkeys"]["bad"]]
    assert len(bad) == 2281
    for vkey in bad:
        with pytest.raises(note.NoteError):
            note.parse_verifier(vkey)


# --- signing and verifying -------------------------------------------------------------------


def test_signing_the_published_text_with_the_published_keys_gives_their_notes() -> None:
    assert note.sign(TEXT, PETER) == GO["signed_by_peter"]["note"]
    assert note.sign(TEXT, PETER, ENOCH) == GO["signed_by_peter_and_enoch"]["note"]


def test_the_published_notes_verify_with_the_published_keys() -> None:
    both = GO["signed_by_peter_and_enoch"]["note"]
    for vkey in (GO["keys"]["PeterNeumann"]["vkey"], GO["keys"]["EnochRoot"]["vkey"]):
        assert note.verify(both, note.parse_verifier(vkey)) == TEXT
    example = C2SP["signed_note_example"]
    assert note.verify(example["note"], note.parse_verifier(example["vkey"])) == example["text"]


def test_a_checkpoint_of_sum_golang_org_verifies_with_its_key_and_others_alongside() -> None:
    extra = SUMDB["more_signers"]
    signed = SUMDB["note"] + "".join(f"{line}\n" for line in
                                     extra["signature_lines"] + extra["unknown_signature_lines"])
    text = note.verify(signed, note.parse_verifier(SUMDB["vkey"]))
    for vkey in extra["vkeys"]:
        assert note.verify(signed, note.parse_verifier(vkey)) == text
    checkpoint = note.parse_checkpoint(text)
    assert (checkpoint.origin, checkpoint.size, checkpoint.root) == (
        SUMDB["origin"], SUMDB["size"], base64.b64decode(SUMDB["root_base64"]))
    assert checkpoint.text() == text
    assert len(note.parse(signed).signatures) == 6


def test_a_changed_text_a_corrupted_signature_or_another_name_or_id_fail() -> None:
    peter = PETER.verifier
    signed = GO["signed_by_peter"]["note"]
    with pytest.raises(note.NoteError, match="does not verify"):
        note.verify(signed.replace("cryptography", "cryptographY"), peter)
    corrupted = TEXT + "\n" + GO["corrupted_signature_lines"]["peter"]
    with pytest.raises(note.NoteError, match="does not verify"):
        note.verify(corrupted, peter)
    for other in (signed.replace("PeterNeumann", "CarmenSandiego"),
                  signed.replace("x08g", "xxxx")):
        with pytest.raises(note.NoteError, match="no signature of PeterNeumann"):
            note.verify(other, peter)


def test_a_failing_signature_by_a_known_key_refuses_the_note_even_beside_a_good_one() -> None:
    """golang.org/x/mod's Open: a known key's signature that fails to verify refuses the note
    (c2sp.org/signed-note: SHOULD), whatever other lines of the same key say."""
    peter, enoch = GO["peter_signature_line"], GO["enoch_signature_line"]
    bad_enoch = GO["corrupted_signature_lines"]["enoch"]
    signed = TEXT + "\n" + peter + peter + enoch + enoch + bad_enoch
    assert note.verify(signed, PETER.verifier) == TEXT
    with pytest.raises(note.NoteError, match="signature of EnochRoot does not verify"):
        note.verify(signed, ENOCH.verifier)


@pytest.mark.parametrize("malformed", GO["malformed_notes"]["notes"])
def test_the_published_malformed_notes_are_refused(malformed: str) -> None:
    with pytest.raises(note.NoteError):
        note.parse(malformed)


def test_more_than_a_hundred_signature_lines_are_refused() -> None:
    line = GO["peter_signature_line"]
    assert note.verify(TEXT + "\n" + line * 100, PETER.verifier) == TEXT
    with pytest.raises(note.NoteError, match="too many signatures"):
        note.parse(TEXT + "\n" + line * GO["too_many_signatures"]["copies"])


def test_a_signature_line_with_a_key_name_holding_a_plus_or_a_space_is_refused() -> None:
    blob = GO["peter_signature_line"].split(" ")[2]
    for name in ("Peter+Neumann", "Peter\u00a0Neumann", "Peter\u2003Neumann"):
        with pytest.raises(note.NoteError, match="key name"):
            note.parse(f"{TEXT}\n\u2014 {name} {blob}")


def test_a_note_whose_text_holds_a_blank_line_parses_and_signs() -> None:
    """c2sp.org/signed-note: the text MAY hold empty lines; the last one separates it from the
    signatures."""
    example = C2SP["note_with_blank_line"]
    parsed = note.parse(example["note"])
    assert parsed.text == example["text"]
    assert [s.name for s in parsed.signatures] == [example["signer"]]
    assert parsed.render() == example["note"]
    assert note.verify(note.sign(example["text"], PETER), PETER.verifier) == example["text"]


# --- checkpoints --------------------------------------------------------------------------------


def test_the_go_checksum_database_tree_note_and_record_hash() -> None:
    tree = GO["sumdb_tree"]
    assert merkle.leaf_hash(tree["record"].encode()) == base64.b64decode(tree["record_hash_base64"])
    checkpoint = note.parse_checkpoint(tree["text"])
    assert (checkpoint.origin, checkpoint.size, checkpoint.extensions) == (
        tree["origin"], tree["size"], ())
    assert checkpoint.root == base64.b64decode(tree["record_hash_base64"])
    assert checkpoint.text() == tree["text"]
    prefixed, hex_size, long_root = tree["bad"]
    assert note.parse_checkpoint(prefixed).origin == "not-" + tree["origin"]  # another log's
    for bad in (hex_size, long_root):
        with pytest.raises(note.NoteError):
            note.parse_checkpoint(bad)


@pytest.mark.parametrize("case", FORMATS["checkpoint_texts"]["valid"],
                         ids=lambda c: c["text"][:20])
def test_the_published_checkpoints_parse_once_their_root_is_a_sha256_hash(
        case: dict[str, Any]) -> None:
    """transparency-dev/formats' examples carry roots like "bananas": a SHA-256 log refuses
    those for their length alone, and reads the rest as they do."""
    with pytest.raises(note.NoteError, match="not 32 bytes"):
        note.parse_checkpoint(case["text"])
    lines = case["text"].split("\n")
    assert base64.b64decode(lines[2]) == case["root"].encode()
    checkpoint = note.parse_checkpoint("\n".join([*lines[:2], ROOT32, *lines[3:]]))
    assert (checkpoint.origin, checkpoint.size) == (case["origin"], case["size"])
    assert "".join(f"{e}\n" for e in checkpoint.extensions) == case.get("rest", "")


@pytest.mark.parametrize("text", FORMATS["checkpoint_texts"]["invalid"])
def test_the_published_malformed_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(note.NoteError):
        note.parse_checkpoint(text)


@pytest.mark.parametrize("size", ["3438945738945739845734895735", str(1 << 64),
                                  "\u0661\u0662\u0663", "\uff11", "\u00b2", "012", "+1", " 1"])
def test_a_size_that_is_not_an_ascii_decimal_below_2_to_the_64_is_refused(size: str) -> None:
    """The size of formats' "too large" example (and other non-sizes) with a 32-byte root, so
    that nothing but the size is wrong."""
    with pytest.raises(note.NoteError, match="size"):
        note.parse_checkpoint(f"Log\n{size}\n{ROOT32}\n")
    assert note.parse_checkpoint(f"Log\n{(1 << 64) - 1}\n{ROOT32}\n").size == (1 << 64) - 1


def test_empty_extension_lines_are_refused() -> None:
    """formats reads trailing empty lines as extension data; c2sp.org/tlog-checkpoint says
    extension lines MUST be non-empty."""
    case = FORMATS["checkpoint_texts"]["lenient_in_formats_refused_by_c2sp"]
    lines = case["text"].split("\n")
    with pytest.raises(note.NoteError, match="empty line"):
        note.parse_checkpoint("\n".join([*lines[:2], ROOT32, *lines[3:]]))
    with pytest.raises(note.NoteError, match="empty line"):
        note.parse_checkpoint(f"Log\n1\n{ROOT32}\nextension\n\nmore\n")


def test_the_c2sp_checkpoint_example() -> None:
    example = C2SP["checkpoint_example"]
    parsed = note.parse(example["note"])
    assert parsed.text == example["text"]
    assert [s.name for s in parsed.signatures] == [example["origin"]]
    checkpoint = note.parse_checkpoint(parsed.text)
    assert (checkpoint.origin, checkpoint.size, checkpoint.root) == (
        example["origin"], example["size"], base64.b64decode(example["root_base64"]))


# --- cosignatures -------------------------------------------------------------------------------


def test_the_c2sp_cosignature_example_has_the_published_layout_time_and_message() -> None:
    example = C2SP["cosignature_example"]
    parsed = note.parse(example["note"])
    log, witness = parsed.signatures
    assert (log.name, len(log.payload)) == (C2SP["checkpoint_example"]["origin"], 64)
    assert (witness.name, len(witness.payload)) == (example["witness"], 72)
    assert struct.unpack(">Q", witness.payload[:8]) == (example["timestamp"],)
    assert note.cosigned_message(parsed.text, example["timestamp"]) == \
        example["signed_message"].encode()


def test_the_published_cosignature_carries_its_time_and_a_note_signature_does_not() -> None:
    stamp = FORMATS["cosignature_timestamp"]
    cosignature = note.parse(f"{TEXT}\n\u2014 w {stamp['signature_base64']}\n").signatures[0]
    assert len(cosignature.payload) == 72
    assert struct.unpack(">Q", cosignature.payload[:8]) == (stamp["timestamp"],)
    plain = note.parse(f"{TEXT}\n\u2014 w {stamp['not_a_cosignature_base64']}\n").signatures[0]
    assert len(plain.payload) == 64


def test_a_cosignature_by_a_published_key_pair_verifies_and_a_later_time_is_refused() -> None:
    """formats' Known key as a witness: its cosignature key id is the type-4 one, its line
    verifies, and a time past 2^63 - 1 (c2sp.org/tlog-cosignature: MUST NOT) is refused."""
    known = signer_from_go_skey(PAIRS[1]["skey"])
    witness = note.Verifier(known.name, known.private.public_key(), note.COSIGNATURE)
    assert witness.id != known.verifier.id
    text = note.parse(SUMDB["note"]).text
    line = note.cosign(text, known, 1727964367)
    assert line.key_id == witness.id
    assert note.verify_cosignature(note.Note(text, (line,)).render(), witness) == 1727964367
    with pytest.raises(note.NoteError, match="time"):
        note.cosign(text, known, 1 << 63)
    late = note.Signature(known.name, witness.id, struct.pack(">Q", 1 << 63) + known.private.sign(
        note.cosigned_message(text, 1 << 63)))
    with pytest.raises(note.NoteError, match="time"):
        note.verify_cosignature(note.Note(text, (late,)).render(), witness)
