"""The audit log's Merkle tree (``control_plane/audit/tree.py``) called directly on an embedded
SQLite file: the stored tiles, roots and proofs held to RFC 6962/9162's recursive definitions
written plainly here (MTH, PATH, SUBPROOF), for every (row, size) pair of small trees and at
the tile boundaries; growing in steps equal to growing at once; the tree of rows sealed before
it existed built in batches (``catch_up``); and the exact errors."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from sqlalchemy import delete, select, update

from control_plane.audit import service as audit
from control_plane.audit import tree
from control_plane.audit.chain import CHAINED, canonical
from control_plane.audit.leaves import leaf_bytes
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditHead, AuditTile
from control_plane.identity import Actor
from control_plane.tlog.merkle import ProofError
from tests.unit.checkpoint_world import World, make_world


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return _sha(b"\x01" + left + right)


# The leaf hashes of the trees below: any 32 bytes do, as the tree stores what it is given.
LEAVES = [_sha(b"\x00" + b"leaf %d" % i) for i in range(256 * 256 + 300)]


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@cache
def mth(start: int, end: int) -> bytes:
    """RFC 6962 §2.1's MTH of leaves [start, end)."""
    if end - start == 0:
        return _sha(b"")
    if end - start == 1:
        return LEAVES[start]
    k = _k(end - start)
    return _node(mth(start, start + k), mth(start + k, end))


def path(m: int, start: int, end: int) -> list[bytes]:
    """RFC 6962 §2.1.1's PATH(m, D[start:end])."""
    n = end - start
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return path(m, start, start + k) + [mth(start + k, end)]
    return path(m - k, start + k, end) + [mth(start, start + k)]


def subproof(m: int, start: int, end: int, whole: bool) -> list[bytes]:
    """RFC 6962 §2.1.2's SUBPROOF(m, D[start:end], b)."""
    n = end - start
    if m == n:
        return [] if whole else [mth(start, end)]
    k = _k(n)
    if m <= k:
        return subproof(m, start, start + k, whole) + [mth(start + k, end)]
    return subproof(m - k, start + k, end, False) + [mth(start, start + k)]


def expected_tiles(size: int) -> dict[tuple[int, int], bytes]:
    """C2SP tiles of height 8 of the tree of the first ``size`` leaves, from MTH alone."""
    tiles: dict[tuple[int, int], bytes] = {}
    level = 0
    while 256 ** level <= size:
        width = 256 ** level
        nodes = [mth(i * width, (i + 1) * width) for i in range(size // width)]
        for start in range(0, len(nodes), 256):
            tiles[(level, start // 256)] = b"".join(nodes[start:start + 256])
        level += 1
    return tiles


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _stored(world: World, tenant: uuid.UUID | None = None) -> dict[tuple[int, int], bytes]:
    with world.sessions() as session:
        rows = session.execute(select(AuditTile.level, AuditTile.idx, AuditTile.hashes).where(
            AuditTile.tenant_id == (tenant or world.tenant))).all()
    return {(lv, idx): bytes(data) for lv, idx, data in rows}


def _grow(world: World, size: int, hashes: list[bytes], tenant: uuid.UUID | None = None
          ) -> int:
    """Append ``hashes`` to the tree of ``size`` and record the new size, as the sealer does."""
    tid = tenant or world.tenant
    with world.sessions() as session:
        begin_write(session)
        grown = tree.append(session, tid, size, hashes)
        session.execute(update(AuditHead).where(AuditHead.tenant_id == tid)
                        .values(tree_size=grown))
        session.commit()
    return grown


def _build(world: World, steps: list[int], tenant: uuid.UUID | None = None) -> int:
    size = 0
    for step in steps:
        grown = _grow(world, size, LEAVES[size:size + step], tenant)
        assert grown == size + step
        size = grown
    return size


# -- pure pieces ----------------------------------------------------------------------------


def test_perfect_root_matches_mth_for_each_power_of_two() -> None:
    for count in (1, 2, 4, 8, 128, 256):
        assert tree.perfect_root(b"".join(LEAVES[:count])) == mth(0, count)
    assert tree.perfect_root(LEAVES[7]) == LEAVES[7]
    assert tree.perfect_root(LEAVES[0] + LEAVES[1]) == _node(LEAVES[0], LEAVES[1])


def test_a_node_is_found_in_its_tile() -> None:
    assert tree.HEIGHT == 8 and tree.WIDTH == 256 and tree.TILE_BYTES == 8192
    assert tree._tile_of((0, 5)) == ((0, 0), 5, 1)
    assert tree._tile_of((0, 300)) == ((0, 1), 44, 1)
    assert tree._tile_of((3, 5)) == ((0, 0), 40, 8)
    assert tree._tile_of((7, 3)) == ((0, 1), 128, 128)
    assert tree._tile_of((8, 3)) == ((1, 0), 3, 1)
    assert tree._tile_of((9, 200)) == ((1, 1), 144, 2)
    assert tree._tile_of((16, 1)) == ((2, 0), 1, 1)


def test_leaf_hash_is_sha256_of_zero_and_the_leaf_bytes(world: World) -> None:
    world.append(3)
    with world.sessions() as session:
        rows = session.scalars(select(AccessLog).where(AccessLog.tenant_id == world.tenant)
                               .order_by(AccessLog.seq)).all()
        assert [r.seq for r in rows] == [1, 2, 3]
        for row in rows:
            assert tree.leaf_hash(row) == _sha(b"\x00" + leaf_bytes(row))
        assert tree.leaf_hash(rows[0], 9) == _sha(b"\x00" + leaf_bytes(rows[0], 9))
        assert tree.leaf_hash(rows[0], 9) != tree.leaf_hash(rows[0])
    # the sealer's tree holds exactly these hashes
    assert _stored(world) == {(0, 0): b"".join(tree.leaf_hash(r) for r in rows)}


# -- small trees: every pair ----------------------------------------------------------------


def test_every_root_and_proof_of_trees_up_to_40_leaves(world: World) -> None:
    size = 0
    with world.sessions() as session:
        assert tree.size_of(session, world.tenant) == 0
        assert tree.head(session, world.tenant) == (0, _sha(b""))
    for step in (1, 1, 2, 3, 5, 8, 13, 7):
        size = _grow(world, size, LEAVES[size:size + step])
        assert _stored(world) == expected_tiles(size)
    assert size == 40
    with world.sessions() as session:
        assert tree.size_of(session, world.tenant) == 40
        assert tree.head(session, world.tenant) == (40, mth(0, 40))
        for n in range(0, 41):
            assert tree.head(session, world.tenant, n) == (n, mth(0, n))
        for n in range(1, 41):
            for seq in range(1, n + 1):
                assert tree.inclusion(session, world.tenant, seq, n) == path(seq - 1, 0, n)
            for m in range(1, n + 1):
                assert tree.consistency(session, world.tenant, m, n) == subproof(m, 0, n, True)


def test_an_unknown_tenant_has_the_empty_tree(world: World) -> None:
    with world.sessions() as session:
        assert tree.size_of(session, uuid.uuid4()) == 0
        assert tree.head(session, uuid.uuid4()) == (0, _sha(b""))


# -- tile boundaries --------------------------------------------------------------------------


def test_trees_across_the_level_one_and_two_tile_boundaries(world: World) -> None:
    steps = [255, 1, 1, 254, 1, 2, 256, 600, 256 * 250, 2000 - 1]
    sizes = []
    size = 0
    for step in steps:
        size = _grow(world, size, LEAVES[size:size + step])
        sizes.append(size)
        if size < 1000:
            assert _stored(world) == expected_tiles(size), size
    assert sizes[:7] == [255, 256, 257, 511, 512, 514, 770]
    assert size == 256 * 256 + 300
    assert _stored(world) == expected_tiles(size)
    assert (2, 0) in expected_tiles(size)
    ask = [(1, 1), (255, 255), (256, 256), (1, 257), (257, 257), (256, 511), (300, 512),
           (513, 514), (1, 65535), (65535, 65536), (65536, 65536), (65537, 65537),
           (256, 65537), (70, size), (size, size), (65600, size)]
    with world.sessions() as session:
        for seq, n in ask:
            assert tree.head(session, world.tenant, n) == (n, mth(0, n))
            assert tree.inclusion(session, world.tenant, seq, n) == path(seq - 1, 0, n)
            assert tree.consistency(session, world.tenant, seq, n) == subproof(seq, 0, n, True)
        reader = tree.Reader(session, world.tenant)
        assert reader([]) == []
        assert (reader.queries, reader.tiles_read) == (0, 0)
        # the root of 300: nodes (8, 0), (5, 8), (3, 36) and (2, 74), in tiles 1/0 and 0/1
        assert reader([(8, 0), (5, 8), (3, 36), (2, 74)]) == [
            mth(0, 256), mth(256, 288), mth(288, 296), mth(296, 300)]
        assert (reader.queries, reader.tiles_read) == (1, 2)
        assert reader([(16, 0), (0, size - 1)]) == [mth(0, 65536), LEAVES[size - 1]]
        assert (reader.queries, reader.tiles_read) == (2, 4)


@pytest.mark.parametrize("steps", [
    [1] * 20 + [236] + [1] * 3 + [254, 255, 1, 2],
    [100, 156, 255, 2, 1, 1, 9],
    [511, 1, 1, 1, 10],
    [1, 510, 513, 1],
])
def test_appending_in_steps_makes_the_tiles_of_one_append(world: World,
                                                          steps: list[int]) -> None:
    total = sum(steps)
    other = world.new_tenant()
    assert _build(world, steps) == total
    assert _build(world, [total], other) == total
    assert _stored(world) == _stored(world, other) == expected_tiles(total)


def test_an_append_of_nothing_writes_nothing(world: World) -> None:
    assert _grow(world, 0, []) == 0
    assert _stored(world) == {(0, 0): b""}  # an empty first tile: no node is read from it
    _build(world, [256])
    assert _grow(world, 256, []) == 256
    assert _stored(world) == {**expected_tiles(256), (0, 1): b""}


# -- errors -------------------------------------------------------------------------------


def test_asks_beyond_the_tree_are_refused_with_their_sentence(world: World) -> None:
    _build(world, [10])
    cases = [
        (lambda s: tree.head(s, world.tenant, 11),
         "the log holds 10 sealed rows; it has no tree of 11"),
        (lambda s: tree.head(s, world.tenant, -1),
         "the log holds 10 sealed rows; it has no tree of -1"),
        (lambda s: tree.inclusion(s, world.tenant, 1, 11),
         "tree_size 11 is beyond the log's 10 sealed rows"),
        (lambda s: tree.inclusion(s, world.tenant, 0, 10),
         "row 0 is not in the tree of the first 10 rows"),
        (lambda s: tree.inclusion(s, world.tenant, 6, 5),
         "row 6 is not in the tree of the first 5 rows"),
        (lambda s: tree.consistency(s, world.tenant, 1, 11),
         "second 11 is beyond the log's 10 sealed rows"),
        (lambda s: tree.consistency(s, world.tenant, 0, 5),
         "no consistency proof from 0 to 5 rows: first must be at least 1 and at most second"),
        (lambda s: tree.consistency(s, world.tenant, 6, 5),
         "no consistency proof from 6 to 5 rows: first must be at least 1 and at most second"),
    ]
    with world.sessions() as session:
        for ask, sentence in cases:
            with pytest.raises(ProofError) as raised:
                ask(session)
            assert str(raised.value) == sentence
        # the edges are allowed
        assert tree.head(session, world.tenant, 10) == (10, mth(0, 10))
        assert tree.inclusion(session, world.tenant, 10, 10) == path(9, 0, 10)
        assert tree.inclusion(session, world.tenant, 1, 1) == []
        assert tree.consistency(session, world.tenant, 10, 10) == []
        assert tree.consistency(session, world.tenant, 1, 10) == subproof(1, 0, 10, True)


def test_tiles_shorter_than_the_size_are_a_tree_error(world: World) -> None:
    _build(world, [300])
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AuditTile).where(AuditTile.tenant_id == world.tenant,
                                                AuditTile.level == 0, AuditTile.idx == 1)
                        .values(hashes=b"".join(LEAVES[256:290])))
        session.commit()
    with world.sessions() as session:
        with pytest.raises(tree.TreeError) as raised:
            tree.head(session, world.tenant)
        assert str(raised.value) == "the tree's tiles lack node (2, 74)"
        assert tree.head(session, world.tenant, 290) == (290, mth(0, 290))
    with world.sessions() as session:
        begin_write(session)
        with pytest.raises(tree.TreeError) as raised:
            tree.append(session, world.tenant, 300, LEAVES[300:301])
        assert str(raised.value) == "tile 0/1 holds fewer hashes than a tree of 300 leaves"
        session.rollback()
    assert _stored(world)[(0, 1)] == b"".join(LEAVES[256:290])
    # a tile holding more than the size says is cut back to the size's hashes
    with world.sessions() as session:
        begin_write(session)
        assert tree.append(session, world.tenant, 260, LEAVES[260:262]) == 262
        session.commit()
    assert _stored(world) == expected_tiles(262)


def test_a_missing_tile_is_a_tree_error_and_a_missing_level_is_rebuilt_from_nothing(
        world: World) -> None:
    _build(world, [600])
    with world.sessions() as session:
        begin_write(session)
        session.execute(delete(AuditTile).where(AuditTile.tenant_id == world.tenant,
                                                AuditTile.level == 1))
        session.commit()
    with world.sessions() as session:
        with pytest.raises(tree.TreeError) as raised:
            tree.head(session, world.tenant)
        assert str(raised.value) == "the tree's tiles lack node (9, 0)"
        begin_write(session)
        with pytest.raises(tree.TreeError) as raised:
            tree.append(session, world.tenant, 600, LEAVES[600:601])
        assert str(raised.value) == "tile 1/0 holds fewer hashes than a tree of 600 leaves"
        session.rollback()


# -- catch_up ---------------------------------------------------------------------------------


def _sealed_without_tree(world: World, n: int) -> None:
    with world.sessions() as session:
        begin_write(session)
        audit.record_many(session, Actor(world.tenant, "api", "k"), "write",
                          [(None, f"row {i} ü") for i in range(n)])
        session.commit()
        audit.seal(session, world.tenant, with_tree=False)
    assert world.head().last_seq == n


def _leaf_hashes(world: World) -> list[bytes]:
    with world.sessions() as session:
        rows = session.scalars(select(AccessLog).where(AccessLog.tenant_id == world.tenant)
                               .order_by(AccessLog.seq)).all()
        return [_sha(b"\x00" + leaf_bytes(r)) for r in rows]


def _catch_up(world: World, size: int, last: int, batch: int) -> int:
    with world.sessions() as session:
        begin_write(session)
        grown = tree.catch_up(session, world.tenant, size, last, batch=batch)
        session.commit()
    return grown


def test_catch_up_in_batches_builds_the_tree_of_one_append(world: World) -> None:
    _sealed_without_tree(world, 300)
    assert _stored(world) == {}
    sizes, size = [], 0
    while True:
        grown = _catch_up(world, size, 300, 7 if size < 250 else 256)
        if grown == size:
            break
        sizes.append(grown)
        size = grown
    assert sizes == list(range(7, 253, 7)) + [300]
    hashes = _leaf_hashes(world)
    other = world.new_tenant()
    with world.sessions() as session:
        begin_write(session)
        assert tree.append(session, other, 0, hashes) == 300
        session.commit()
    assert _stored(world) == _stored(world, other)
    assert _stored(world)[(0, 0)] == b"".join(hashes[:256])


def test_catch_up_stops_at_last_seq(world: World) -> None:
    _sealed_without_tree(world, 30)
    assert _catch_up(world, 0, 20, 100) == 20
    assert _catch_up(world, 20, 20, 100) == 20
    assert _catch_up(world, 20, 30, 5) == 25
    assert _stored(world) == {(0, 0): b"".join(_leaf_hashes(world)[:25])}


def _alter(world: World, at_seq: int, **values: object) -> None:
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AccessLog).where(AccessLog.tenant_id == world.tenant,
                                                AccessLog.seq == at_seq).values(**values))
        session.commit()


@pytest.mark.parametrize("change", ["prev_hash", "row_hash", "detail", "gap", "seq",
                                    "relinked"])
def test_catch_up_stops_below_a_broken_chain_and_warns_once(
        world: World, change: str, caplog: pytest.LogCaptureFixture) -> None:
    _sealed_without_tree(world, 20)
    hashes = _leaf_hashes(world)
    if change == "gap":
        with world.sessions() as session:
            begin_write(session)
            session.execute(delete(AccessLog).where(AccessLog.tenant_id == world.tenant,
                                                    AccessLog.seq == 13))
            session.commit()
    elif change == "seq":
        _alter(world, 13, seq=None)
    elif change == "relinked":  # row 13 gone, row 14 chained onto row 12: a valid link, no 13
        with world.sessions() as session:
            begin_write(session)
            session.execute(delete(AccessLog).where(AccessLog.tenant_id == world.tenant,
                                                    AccessLog.seq == 13))
            prev = session.scalar(select(AccessLog.row_hash).where(
                AccessLog.tenant_id == world.tenant, AccessLog.seq == 12))
            row = session.execute(select(*CHAINED).where(AccessLog.tenant_id == world.tenant,
                                                         AccessLog.seq == 14)).one()
            session.execute(update(AccessLog).where(AccessLog.id == row.id).values(
                prev_hash=prev, row_hash=hashlib.sha256(prev.encode() + canonical(row))
                .hexdigest()))
            session.commit()
    else:
        _alter(world, 13, **{change: "0" * 64 if change != "detail" else "altered"})
    caplog.set_level(logging.WARNING, logger="control_plane.audit.tree")
    assert _catch_up(world, 0, 20, 5) == 5
    assert _catch_up(world, 5, 20, 5) == 10
    assert _catch_up(world, 10, 20, 5) == 12
    assert _catch_up(world, 12, 20, 5) == 12
    assert _catch_up(world, 12, 20, 5) == 12
    assert _stored(world) == {(0, 0): b"".join(hashes[:12])}
    assert [r.getMessage() for r in caplog.records] == [
        f"the audit tree of tenant {world.tenant} stops at row 12: the hash chain is broken "
        "after it"]


def test_catch_up_from_a_row_whose_hash_is_gone_builds_nothing(world: World) -> None:
    _sealed_without_tree(world, 10)
    _build(world, [4])  # any tiles: the point is the link below
    with world.sessions() as session:
        begin_write(session)
        session.execute(delete(AccessLog).where(AccessLog.tenant_id == world.tenant,
                                                AccessLog.seq == 4))
        session.commit()
    assert _catch_up(world, 4, 10, 5) == 4


def test_catch_up_onto_tiles_that_disagree_returns_the_size_and_warns_once(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    _sealed_without_tree(world, 300)
    assert _catch_up(world, 0, 300, 256) == 256
    with world.sessions() as session:
        begin_write(session)
        session.execute(delete(AuditTile).where(AuditTile.tenant_id == world.tenant,
                                                AuditTile.level == 1))
        session.commit()
    caplog.set_level(logging.WARNING, logger="control_plane.audit.tree")
    assert _catch_up(world, 256, 300, 10) == 266  # a new level-0 tile: nothing read
    assert _catch_up(world, 266, 300, 10) == 266  # the edge of level 1 is read: missing
    assert _catch_up(world, 266, 300, 10) == 266
    assert [r.getMessage() for r in caplog.records] == [
        f"the audit tree of tenant {world.tenant} cannot grow: its stored tiles are not "
        "those of its first 266 rows"]


def test_a_plain_connection_reads_the_tree_as_a_session_does(world: World) -> None:
    _build(world, [37])
    with world.engine.connect() as conn:
        assert tree.size_of(conn, world.tenant) == 37
        assert tree.head(conn, world.tenant) == (37, mth(0, 37))
        assert tree.inclusion(conn, world.tenant, 5, 37) == path(4, 0, 37)
        assert tree.consistency(conn, world.tenant, 9, 37) == subproof(9, 0, 37, True)
