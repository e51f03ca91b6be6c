"""The Merkle tree of RFC 9162 §2.1 (the tree of Certificate Transparency), its inclusion and
consistency proofs, and their verification.

Leaves are hashed as SHA-256(0x00 ‖ leaf), interior nodes as SHA-256(0x01 ‖ left ‖ right); a
tree of n leaves splits at the largest power of two below n. The tree is read through the
hashes of its *perfect* subtrees: node (level, index) is the root of the 2^level leaves from
index·2^level. Those are the hashes a log stores (``control_plane/audit/tree.py`` keeps them
in C2SP tlog tiles); every other hash a proof needs is folded from O(log n) of them, so a
proof at any size reads O(log n) stored hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

HASH_SIZE = 32
Node = tuple[int, int]  # (level, index): the perfect subtree of 2**level leaves at index
#: Reads stored perfect-subtree hashes, in the order asked.
Reader = Callable[[Sequence[Node]], Sequence[bytes]]

EMPTY_ROOT = hashlib.sha256(b"").digest()


class ProofError(ValueError):
    """A proof was asked for sizes or indexes the tree cannot prove."""


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def range_nodes(start: int, end: int) -> list[Node]:
    """The perfect subtrees whose roots fold into the hash of leaves [start, end), left to
    right (each as large as ``start``'s alignment and the remaining width allow)."""
    nodes: list[Node] = []
    while start < end:
        width = end - start
        level = width.bit_length() - 1
        if start:
            level = min(level, (start & -start).bit_length() - 1)
        nodes.append((level, start >> level))
        start += 1 << level
    return nodes


def fold(hashes: Sequence[bytes]) -> bytes:
    """The hash of a range from its perfect subtrees' hashes, left to right: the right ones
    join first, as RFC 9162's recursion joins them."""
    if not hashes:
        return EMPTY_ROOT
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def _ranges_hashes(ranges: Sequence[tuple[int, int]], read: Reader) -> list[bytes]:
    """The hash of each [start, end) range, with one read of every stored hash they need."""
    layouts = [range_nodes(start, end) for start, end in ranges]
    wanted = sorted({node for nodes in layouts for node in nodes})
    stored = dict(zip(wanted, read(wanted), strict=True))
    return [fold([stored[node] for node in nodes]) for nodes in layouts]


def root(size: int, read: Reader) -> bytes:
    """The tree head of the first ``size`` leaves."""
    return _ranges_hashes([(0, size)], read)[0] if size else EMPTY_ROOT


def root_of_leaves(leaves: Sequence[bytes]) -> bytes:
    """The tree head of these leaf inputs, computed from nothing else (for tests and for
    checking a few leaves by hand)."""
    level = [leaf_hash(leaf) for leaf in leaves]
    if not level:
        return EMPTY_ROOT
    return _mth(level)


def _mth(hashes: Sequence[bytes]) -> bytes:
    if len(hashes) == 1:
        return hashes[0]
    k = _split(len(hashes))
    return node_hash(_mth(hashes[:k]), _mth(hashes[k:]))


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes make the inclusion proof of leaf ``index`` in a tree of
    ``size`` leaves (RFC 9162 §2.1.3.1), in proof order."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    ranges.reverse()
    return ranges


def inclusion_proof(index: int, size: int, read: Reader) -> list[bytes]:
    return _ranges_hashes(inclusion_ranges(index, size), read)


def consistency_ranges(first: int, second: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes make the consistency proof between the trees of
    ``first`` and ``second`` leaves (RFC 9162 §2.1.4.1), in proof order."""
    if not 0 < first <= second:
        raise ProofError(f"no consistency proof from {first} to {second} leaves")
    ranges: list[tuple[int, int]] = []
    start, end, m, whole = 0, second, first, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start, m, whole = start + k, m - k, False
    if not whole:
        ranges.append((start, end))
    ranges.reverse()
    return ranges


def consistency_proof(first: int, second: int, read: Reader) -> list[bytes]:
    if first == second:
        return []
    return _ranges_hashes(consistency_ranges(first, second), read)


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes],
                     expected_root: bytes) -> bool:
    """RFC 9162 §2.1.3.2: whether ``proof`` shows ``leaf`` (its hash) at ``index`` of the tree
    whose head of ``size`` leaves is ``expected_root``."""
    if not 0 <= index < size or any(len(p) != HASH_SIZE for p in (leaf, *proof)):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == expected_root


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                       proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2: whether ``proof`` shows the tree of ``second`` leaves (head
    ``second_root``) extends the tree of ``first`` leaves (head ``first_root``). The empty
    tree (head SHA-256 of nothing) is a prefix of every tree, with an empty proof."""
    if any(len(p) != HASH_SIZE for p in proof) or not 0 <= first <= second:
        return False
    if first == 0:
        return not proof and first_root == EMPTY_ROOT and (second > 0 or second_root == EMPTY_ROOT)
    if first == second:
        return not proof and first_root == second_root
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: the old head is a node of the new tree
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_root and sr == second_root
