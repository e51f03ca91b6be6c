"""The transparency log against an independent implementation: tlog-scales (PyPI), which writes
a log as C2SP tlog tiles, computes heads and RFC 9162 proofs from those tiles by RFC 9162's own
recursion, verifies proofs by a line-for-line transcription of RFC 9162 §2.1.3.2 and §2.1.4.2,
and signs and verifies C2SP checkpoints and Ed25519 cosignatures. A log it writes in uneven
batches (partial tiles, two tile levels) is read back through our ``merkle.Reader``; for
random sizes and leaves, both sides' heads and proofs are the same bytes, each side's
verifiers accept the other's proofs and refuse them altered, and each side's notes verify
with the other's verifier keys."""

from __future__ import annotations

import base64
import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from tlog_scales import signing, tlog
from tlog_scales.backend import LocalBackend
from tlog_scales.reader import TilesReader
from tlog_scales.writer import TilesWriter

from control_plane.tlog import merkle, note

ORIGIN = "memplane.example/audit/interop"
BATCHES = [1, 2, 5, 248, 3, 300, 39, 512, 90]  # 1200 leaves; partial tiles on two levels
SIZE = sum(BATCHES)
SEED = bytes(range(32))


@dataclass
class Log:
    leaves: list[bytes]
    tiles: TilesReader  # tlog-scales' reader over the tiles its writer wrote
    checkpoints: dict[int, str]  # the signed checkpoint it wrote after each batch
    log_key: signing.Vkey

    def read(self, wanted: Sequence[merkle.Node]) -> list[bytes]:
        """Our Reader over their stored hashes: each perfect subtree as their tiles give it."""
        return [self.tiles.mth(index << level, (index + 1) << level) for level, index in wanted]

    def head(self, size: int) -> bytes:
        return self.tiles.mth(0, size)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Log:
    rng = random.Random(44)
    root = tmp_path_factory.mktemp("tlog-scales") / "log"
    writer = TilesWriter.create(root, ORIGIN)
    signer = signing.PlainEd25519Signer(ORIGIN, SEED)
    leaves: list[bytes] = []
    checkpoints: dict[int, str] = {}
    for batch in BATCHES:
        for _ in range(batch):
            leaf = rng.randbytes(rng.randrange(0, 80))
            writer.add_leaf(leaf)
            leaves.append(leaf)
        writer.commit([signer])
        checkpoints[len(leaves)] = (root / "checkpoint").read_text()
    assert sorted(p.name for p in (root / "tile").iterdir()) == ["0", "1", "entries"]
    reader = TilesReader(LocalBackend(root))
    reader.set_size(SIZE)
    return Log(leaves, reader, checkpoints, signer.vkey)


def sizes_and_index() -> st.SearchStrategy[tuple[int, int]]:
    return st.integers(1, SIZE).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1)))


def two_sizes() -> st.SearchStrategy[tuple[int, int]]:
    return st.integers(1, SIZE).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n)))


def bent(proof: list[bytes], rng: random.Random) -> list[bytes]:
    """The proof with one bit of one hash flipped."""
    at = rng.randrange(len(proof))
    changed = bytearray(proof[at])
    changed[rng.randrange(32)] ^= 1 << rng.randrange(8)
    return [*proof[:at], bytes(changed), *proof[at + 1:]]


def test_the_heads_agree_at_every_size_they_signed(log: Log) -> None:
    verifier = note.parse_verifier(log.log_key.serialize())
    for size, signed in log.checkpoints.items():
        checkpoint = note.parse_checkpoint(note.verify(signed, verifier))
        assert (checkpoint.origin, checkpoint.size) == (ORIGIN, size)
        assert checkpoint.root == merkle.root(size, log.read) == log.head(size)
        assert checkpoint.root == merkle.root_of_leaves(log.leaves[:size])


@given(st.integers(0, SIZE))
def test_the_heads_agree_at_any_size(log: Log, size: int) -> None:
    assert merkle.root(size, log.read) == log.head(size) == merkle.root_of_leaves(log.leaves[:size])


@given(sizes_and_index(), st.randoms(use_true_random=False))
def test_inclusion_proofs_are_the_same_bytes_and_each_side_verifies_the_other(
        log: Log, case: tuple[int, int], rng: random.Random) -> None:
    size, index = case
    ours = merkle.inclusion_proof(index, size, log.read)
    theirs = log.tiles.get_inclusion_proof(index, size)
    assert ours == theirs.node_hashes
    leaf, head = merkle.leaf_hash(log.leaves[index]), log.head(size)
    tlog.InclusionProof(index, size, ours).check(leaf, head)  # raises if refused
    assert merkle.verify_inclusion(leaf, index, size, theirs.node_hashes, head)
    if ours:
        altered = bent(ours, rng)
        with pytest.raises(tlog.InclusionProofInvalid):
            tlog.InclusionProof(index, size, altered).check(leaf, head)
        assert not merkle.verify_inclusion(leaf, index, size, altered, head)


@given(two_sizes(), st.randoms(use_true_random=False))
def test_consistency_proofs_are_the_same_bytes_and_each_side_verifies_the_other(
        log: Log, case: tuple[int, int], rng: random.Random) -> None:
    first, second = case
    ours = merkle.consistency_proof(first, second, log.read)
    theirs = log.tiles.get_consistency_proof(first, second)
    assert ours == theirs.node_hashes
    old, new = log.head(first), log.head(second)
    tlog.ConsistencyProof(first, second, ours).check(old, new)  # raises if refused
    assert merkle.verify_consistency(first, second, old, new, theirs.node_hashes)
    if ours:
        altered = bent(ours, rng)
        with pytest.raises(tlog.ConsistencyProofInvalid):
            tlog.ConsistencyProof(first, second, altered).check(old, new)
        assert not merkle.verify_consistency(first, second, old, new, altered)


def test_both_sides_take_a_proof_from_the_empty_tree_only_from_its_head(log: Log) -> None:
    tlog.ConsistencyProof(0, 5, []).check(merkle.EMPTY_ROOT, log.head(5))
    assert merkle.verify_consistency(0, 5, merkle.EMPTY_ROOT, log.head(5), [])
    with pytest.raises(tlog.ConsistencyProofInvalid):
        tlog.ConsistencyProof(0, 5, []).check(log.head(1), log.head(5))
    assert not merkle.verify_consistency(0, 5, log.head(1), log.head(5), [])


# --- notes ----------------------------------------------------------------------------------


def test_verifier_keys_and_key_ids_are_the_same_text() -> None:
    private = Ed25519PrivateKey.from_private_bytes(SEED)
    ours = note.Signer(ORIGIN, private).verifier
    theirs = signing.PlainEd25519Signer(ORIGIN, SEED).vkey
    assert ours.text() == theirs.serialize()
    assert ours.id == theirs.key_id.to_bytes(4, "big")
    cosigner = note.Verifier("witness.example/w1", private.public_key(), note.COSIGNATURE)
    assert cosigner.text() == signing.Vkey(cosigner.name, None, 4, bytes(
        private.public_key().public_bytes_raw())).serialize()


def test_our_signed_checkpoint_verifies_with_theirs_and_theirs_with_ours(log: Log) -> None:
    signer = note.Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(SEED))
    head = log.head(700)
    ours = note.sign(note.Checkpoint(ORIGIN, 700, head).text(), signer)
    parsed = tlog.Checkpoint.from_text(ours)
    assert (parsed.origin, parsed.size, parsed.root_hash) == (ORIGIN, 700, head)
    parsed.verify(signing.Vkey.from_string(signer.verifier.text()))  # raises if refused
    theirs = tlog.Checkpoint.make_signed(ORIGIN, 700, head, [
        signing.PlainEd25519Signer(ORIGIN, SEED)]).serialize()
    assert theirs == ours  # Ed25519 is deterministic: the same bytes
    forged = tlog.Checkpoint.from_text(ours.replace("\n700\n", "\n701\n"))
    with pytest.raises(InvalidSignature):
        forged.verify(signing.Vkey.from_string(signer.verifier.text()))


def test_our_cosignature_verifies_with_their_cosignature_verifier(log: Log) -> None:
    log_signer = note.Signer(ORIGIN, Ed25519PrivateKey.from_private_bytes(SEED))
    witness = note.Signer("witness.example/w1", Ed25519PrivateKey.from_private_bytes(
        bytes(reversed(SEED))))
    text = note.Checkpoint(ORIGIN, SIZE, log.head(SIZE)).text()
    line = note.cosign(text, witness, 1_790_000_000)
    cosigned = note.Note(text, (*note.parse(note.sign(text, log_signer)).signatures, line))
    checkpoint = tlog.Checkpoint.from_text(cosigned.render())
    vkey = signing.Vkey.from_string(note.Verifier(
        witness.name, witness.private.public_key(), note.COSIGNATURE).text())
    assert vkey.sig_type == 4
    assert {v.name for v, _ in signing.VkeySet(vkey).verify(checkpoint.signatures,
                                                             checkpoint)} == {witness.name}
    moved = tlog.Checkpoint.from_text(cosigned.render().replace(
        base64.b64encode(line.key_id + line.payload).decode(),
        base64.b64encode(line.key_id + (1_790_000_001).to_bytes(8, "big")
                         + line.payload[8:]).decode()))
    assert signing.VkeySet(vkey).verify(moved.signatures, moved) == set()
