"""The RFC 9162 tree over stored perfect-subtree hashes: heads, inclusion and consistency
proofs agree with the tree computed from the leaves alone, and verification refuses every
altered proof."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control_plane.tlog import merkle


def stored(leaves: Sequence[bytes]) -> tuple[merkle.Reader, list[merkle.Node]]:
    """Every perfect subtree's hash, as a log stores them, and a reader that records what
    it was asked for."""
    nodes: dict[merkle.Node, bytes] = {}
    level = [merkle.leaf_hash(leaf) for leaf in leaves]
    height = 0
    while level:
        for index, value in enumerate(level):
            nodes[(height, index)] = value
        level = [merkle.node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        height += 1
    asked: list[merkle.Node] = []

    def read(wanted: Sequence[merkle.Node]) -> list[bytes]:
        asked.extend(wanted)
        return [nodes[node] for node in wanted]
    return read, asked


LEAVES = [f"leaf {i}".encode() for i in range(70)]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 32, 33, 64, 70])
def test_the_head_over_stored_hashes_is_the_head_over_the_leaves(size: int) -> None:
    read, _ = stored(LEAVES[:size])
    assert merkle.root(size, read) == merkle.root_of_leaves(LEAVES[:size])


def test_known_small_heads() -> None:
    a, b, c = b"a", b"b", b"c"
    la, lb, lc = (merkle.leaf_hash(x) for x in (a, b, c))
    assert merkle.root_of_leaves([]) == bytes.fromhex(
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert merkle.root_of_leaves([a]) == la
    assert merkle.root_of_leaves([a, b, c]) == merkle.node_hash(merkle.node_hash(la, lb), lc)


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_every_inclusion_proof_verifies_and_no_altered_one_does(case: tuple[int, int]) -> None:
    size, index = case
    leaves = [i.to_bytes(4, "big") for i in range(size)]
    read, asked = stored(leaves)
    head = merkle.root(size, read)
    asked.clear()
    proof = merkle.inclusion_proof(index, size, read)
    assert len(set(asked)) <= 2 * size.bit_length()  # O(log n) stored hashes
    leaf = merkle.leaf_hash(leaves[index])
    assert merkle.verify_inclusion(leaf, index, size, proof, head)
    if proof:
        bent = [*proof[:-1], bytes(32)]
        assert not merkle.verify_inclusion(leaf, index, size, bent, head)
        assert not merkle.verify_inclusion(leaf, index, size, proof[:-1], head)
    assert not merkle.verify_inclusion(merkle.leaf_hash(b"other"), index, size, proof, head)
    if size > 1:
        assert not merkle.verify_inclusion(leaf, (index + 1) % size, size, proof, head)


@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(1, n), st.just(n))))
def test_every_consistency_proof_verifies_and_no_altered_one_does(case: tuple[int, int]) -> None:
    first, second = case
    leaves = [i.to_bytes(4, "big") for i in range(second)]
    read, _ = stored(leaves)
    old, new = merkle.root(first, read), merkle.root(second, read)
    proof = merkle.consistency_proof(first, second, read)
    assert merkle.verify_consistency(first, second, old, new, proof)
    assert not merkle.verify_consistency(first, second, merkle.leaf_hash(b"x"), new, proof)
    if proof:
        assert not merkle.verify_consistency(first, second, old, new, [bytes(32), *proof[1:]])
        assert not merkle.verify_consistency(first, second, old, new, proof[:-1])
    forked = [*leaves[:first - 1], b"forked", *leaves[first:]] if first < second else None
    if forked is not None:
        other_read, _ = stored(forked)
        assert not merkle.verify_consistency(first, second, old, merkle.root(second, other_read),
                                             merkle.consistency_proof(first, second, other_read))


def test_impossible_proofs_are_refused() -> None:
    read, _ = stored(LEAVES[:5])
    with pytest.raises(merkle.ProofError):
        merkle.inclusion_proof(5, 5, read)
    with pytest.raises(merkle.ProofError):
        merkle.consistency_proof(6, 5, read)
    assert merkle.consistency_proof(5, 5, read) == []
