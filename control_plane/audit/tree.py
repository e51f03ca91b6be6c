"""The audit log's Merkle tree (RFC 9162 §2.1, ``control_plane.tlog.merkle``), stored as C2SP
tlog tiles (https://c2sp.org/tlog-tiles) in ``audit_tiles``.

Every sealed row is a leaf, leaf index ``seq − 1``, leaf input ``leaves.leaf_bytes(row)``.
Tiles have height 8: the tile (level L, index i) holds the hashes of the tree's nodes at
height 8·L with indexes 256·i … 256·i + 255, 32 bytes each, concatenated in order; the tile
at each level's right edge is partial and grows until it holds 256. Level 0 holds the leaf
hashes; a full tile's root (the node 8 levels above its first hash) is the next hash of the
tile one level up. Any other node of a perfect subtree — height h with h % 8 ≠ 0 — is folded
from the 2^(h % 8) hashes of its own tile (at most 127 hashes). So a head or proof at any
size reads O(log n) tiles, in one query: at a million leaves, tiles of three levels.

The sealer appends to the tiles in the transaction that seals the rows (``service.seal``),
under the tenant's head lock: ``audit_heads.tree_size`` — the leaves the tiles hold — is the
head's ``last_seq`` at every commit. A tenant whose rows were sealed before the tree existed
(``tree_size`` behind ``last_seq``) has its tree built by the sealer before it seals anything
new, from the sealed rows, each held to the hash chain first, a batch per transaction
(``catch_up``): a restart resumes at ``tree_size``. Where the chain is broken the tree stops
below the break and the sealer goes on chaining rows without it (``verify`` names the break).

Hashes stored for nodes beyond an older size are the same in every later tree (they are
perfect subtrees), so the tiles of today's tree prove any earlier size as well.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, LargeBinary, bindparam, func, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from ..db.models import AccessLog, AuditHead, AuditTile
from ..tlog import merkle
from .chain import CHAINED, GENESIS, canonical
from .leaves import leaf_bytes

log = logging.getLogger(__name__)

HEIGHT = 8
WIDTH = 1 << HEIGHT
HASH = merkle.HASH_SIZE
TILE_BYTES = WIDTH * HASH

Tile = tuple[int, int]  # (tile level, tile index)


class TreeError(RuntimeError):
    """The stored tiles do not hold what the recorded tree size says they hold."""


def _tile_of(node: merkle.Node) -> tuple[Tile, int, int]:
    """The tile holding node (height, index)'s hashes, the first one's position in it, and
    how many (a power of two, all in that tile)."""
    height, index = node
    level, above = divmod(height, HEIGHT)
    first = index << above
    return (level, first >> HEIGHT), first & (WIDTH - 1), 1 << above


def perfect_root(hashes: bytes) -> bytes:
    """The root over a power-of-two run of concatenated hashes."""
    level = [hashes[i:i + HASH] for i in range(0, len(hashes), HASH)]
    while len(level) > 1:
        level = [merkle.node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


# The statements, built once (building one costs more than running it).
_LOAD = select(AuditTile.level, AuditTile.idx, AuditTile.hashes).where(
    AuditTile.tenant_id == bindparam("tenant"),
    tuple_(AuditTile.level, AuditTile.idx).in_(bindparam("tiles", expanding=True)))
_GROW = update(AuditTile).where(
    AuditTile.tenant_id == bindparam("tenant"), AuditTile.level == 0,
    AuditTile.idx == bindparam("tile"), func.length(AuditTile.hashes) == bindparam("have"),
).values(hashes=AuditTile.hashes.op("||")(bindparam("more", type_=LargeBinary)))
_SIZE = select(AuditHead.tree_size).where(AuditHead.tenant_id == bindparam("tenant"))


def _upsert_in(dialect: Any) -> Any:
    insert = dialect.insert(AuditTile)
    return insert.on_conflict_do_update(index_elements=["tenant_id", "level", "idx"],
                                        set_={"hashes": insert.excluded.hashes})


_UPSERT = {"postgresql": _upsert_in(postgresql), "sqlite": _upsert_in(sqlite)}


def _core(conn: Session | Connection) -> Connection:
    """The session's connection: Core statements skip the ORM's layer (half their cost)."""
    return conn.connection() if isinstance(conn, Session) else conn


def _load(conn: Session | Connection, tenant_id: uuid.UUID,
          tiles: Iterable[Tile]) -> dict[Tile, bytes]:
    wanted = sorted(set(tiles))
    if not wanted:
        return {}
    rows = _core(conn).execute(_LOAD, {"tenant": tenant_id, "tiles": wanted}).all()
    return {(int(level), int(idx)): bytes(data) for level, idx, data in rows}


class Reader:
    """A ``merkle.Reader`` over a tenant's tiles: each call reads the tiles it needs in one
    query. ``queries`` and ``tiles_read`` count what was read."""

    def __init__(self, conn: Session | Connection, tenant_id: uuid.UUID) -> None:
        self.conn, self.tenant_id = conn, tenant_id
        self.queries = self.tiles_read = 0

    def __call__(self, nodes: Sequence[merkle.Node]) -> list[bytes]:
        plan = [_tile_of(node) for node in nodes]
        stored = _load(self.conn, self.tenant_id, (tile for tile, _, _ in plan))
        self.queries += 1 if plan else 0
        self.tiles_read += len(stored)
        hashes = []
        for node, (tile, offset, count) in zip(nodes, plan, strict=True):
            run = stored.get(tile, b"")[offset * HASH:(offset + count) * HASH]
            if len(run) != count * HASH:
                raise TreeError(f"the tree's tiles lack node {node}")
            hashes.append(run if count == 1 else perfect_root(run))
        return hashes


# -- reading ---------------------------------------------------------------------------------


def size_of(conn: Session | Connection, tenant_id: uuid.UUID) -> int:
    """The leaves the tenant's tree holds (0 without a head)."""
    size = _core(conn).execute(_SIZE, {"tenant": tenant_id}).scalar()
    return int(size or 0)


def head(conn: Session | Connection, tenant_id: uuid.UUID,
         size: int | None = None) -> tuple[int, bytes]:
    """(size, root hash) of the tenant's tree now, or at an earlier ``size``."""
    current = size_of(conn, tenant_id)
    if size is None:
        size = current
    elif not 0 <= size <= current:
        raise merkle.ProofError(f"the log holds {current} sealed rows; it has no tree of "
                                f"{size}")
    return size, merkle.root(size, Reader(conn, tenant_id))


def inclusion(conn: Session | Connection, tenant_id: uuid.UUID, seq: int,
              tree_size: int) -> list[bytes]:
    """The inclusion proof of row ``seq`` (leaf ``seq − 1``) in the tree of ``tree_size``."""
    current = size_of(conn, tenant_id)
    if tree_size > current:
        raise merkle.ProofError(f"tree_size {tree_size} is beyond the log's {current} sealed "
                                "rows")
    if not 1 <= seq <= tree_size:
        raise merkle.ProofError(f"row {seq} is not in the tree of the first {tree_size} rows")
    return merkle.inclusion_proof(seq - 1, tree_size, Reader(conn, tenant_id))


def consistency(conn: Session | Connection, tenant_id: uuid.UUID, first: int,
                second: int) -> list[bytes]:
    """The consistency proof from the tree of ``first`` rows to the tree of ``second``."""
    current = size_of(conn, tenant_id)
    if second > current:
        raise merkle.ProofError(f"second {second} is beyond the log's {current} sealed rows")
    if not 1 <= first <= second:
        raise merkle.ProofError(f"no consistency proof from {first} to {second} rows: first "
                                "must be at least 1 and at most second")
    return merkle.consistency_proof(first, second, Reader(conn, tenant_id))


# -- growing ---------------------------------------------------------------------------------


def append(session: Session, tenant_id: uuid.UUID, size: int,
           leaf_hashes: Sequence[bytes]) -> int:
    """Add leaves ``size``, ``size + 1``, … (their hashes) to a tree of ``size`` leaves;
    returns the new size. Run under the tenant's head lock, in the sealing transaction;
    raises TreeError, having written nothing, when the stored tiles disagree with ``size``.

    While no tile fills, only the level-0 tile at the edge grows: on PostgreSQL the new
    hashes are appended to it in one statement (``||``), with no read; a new tile is one
    insert. Otherwise the right-edge tiles are read (one query), extended, their roots carried
    up as tiles fill, and every tile that changed written in one upsert."""
    fill = size & (WIDTH - 1)
    if fill + len(leaf_hashes) < WIDTH:
        if not fill:
            _upsert(session, tenant_id, {(0, size >> HEIGHT): b"".join(leaf_hashes)})
            return size + len(leaf_hashes)
        if session.get_bind().dialect.name == "postgresql":
            grown = _core(session).execute(_GROW, {
                "tenant": tenant_id, "tile": size >> HEIGHT, "have": fill * HASH,
                "more": b"".join(leaf_hashes)})
            if getattr(grown, "rowcount", 0) != 1:
                raise TreeError(f"tile 0/{size >> HEIGHT} does not hold the hashes of a tree "
                                f"of {size} leaves")
            return size + len(leaf_hashes)
    edge, index = _edge(session, tenant_id, size)
    written: dict[Tile, bytes] = {}
    touched: set[int] = set()
    for leaf in leaf_hashes:
        lv, value = 0, leaf
        while True:
            if lv == len(edge):
                edge.append(bytearray())
                index.append(0)
            edge[lv] += value
            touched.add(lv)
            if len(edge[lv]) < TILE_BYTES:
                break
            full = bytes(edge[lv])
            written[(lv, index[lv])] = full
            edge[lv].clear()
            index[lv] += 1
            lv, value = lv + 1, perfect_root(full)
    for lv in touched:
        if edge[lv]:
            written[(lv, index[lv])] = bytes(edge[lv])
    _upsert(session, tenant_id, written)
    return size + len(leaf_hashes)


def _edge(session: Session, tenant_id: uuid.UUID,
          size: int) -> tuple[list[bytearray], list[int]]:
    """The right-edge tile of each level of a tree of ``size`` leaves (its hashes so far, and
    its index), read in one query."""
    edge: list[bytearray] = []
    index: list[int] = []
    count = size
    while count:
        index.append(count >> HEIGHT)
        edge.append(bytearray((count & (WIDTH - 1)) * HASH))
        count >>= HEIGHT
    partial = {(lv, index[lv]) for lv in range(len(edge)) if edge[lv]}
    stored = _load(session, tenant_id, partial)
    for lv, idx in partial:
        have = stored.get((lv, idx), b"")
        if len(have) < len(edge[lv]):
            raise TreeError(f"tile {lv}/{idx} holds fewer hashes than a tree of {size} leaves")
        edge[lv][:] = have[:len(edge[lv])]
    return edge, index


def _upsert(session: Session, tenant_id: uuid.UUID, tiles: dict[Tile, bytes]) -> None:
    """Write these tiles whole, in one statement (a tile already there, even one holding
    hashes beyond the tree's size, is replaced)."""
    if not tiles:
        return
    _core(session).execute(_UPSERT[session.get_bind().dialect.name], [
        {"tenant_id": tenant_id, "level": lv, "idx": idx, "hashes": data}
        for (lv, idx), data in sorted(tiles.items())])


def leaf_hash(row: Any, seq: int | None = None) -> bytes:
    """The tree's hash of a row: SHA-256(0x00 ‖ leaf_bytes(row))."""
    return hashlib.sha256(b"\x00" + leaf_bytes(row, seq)).digest()


_warned: set[uuid.UUID] = set()


def catch_up(session: Session, tenant_id: uuid.UUID, tree_size: int, last_seq: int, *,
             batch: int) -> int:
    """Build the tree of rows sealed before it existed: the next ``batch`` sealed rows after
    ``tree_size``, each held to the hash chain, appended to the tiles. Returns the new tree
    size; ``tree_size`` itself when the next row is missing or does not match its chain link
    (the chain is broken there: the tree cannot grow past it). Run under the head lock; the
    caller records the size and commits."""
    end = min(last_seq, tree_size + batch)
    prev = GENESIS if tree_size == 0 else session.scalar(
        select(AccessLog.row_hash).where(AccessLog.tenant_id == tenant_id,
                                         AccessLog.seq == tree_size))
    rows = session.execute(
        select(*CHAINED).where(AccessLog.tenant_id == tenant_id, AccessLog.seq > tree_size,
                               AccessLog.seq <= end).order_by(AccessLog.seq)).all()
    hashes = []
    expected = tree_size + 1
    for row in rows:
        if (row.seq != expected or prev is None or row.prev_hash != prev
                or row.row_hash != hashlib.sha256(prev.encode() + canonical(row)).hexdigest()):
            break
        hashes.append(leaf_hash(row))
        prev, expected = row.row_hash, expected + 1
    if not hashes:
        if tenant_id not in _warned:
            _warned.add(tenant_id)
            log.warning("the audit tree of tenant %s stops at row %s: the hash chain is broken "
                        "after it", tenant_id, tree_size)
        return tree_size
    try:
        return append(session, tenant_id, tree_size, hashes)
    except TreeError:
        if tenant_id not in _warned:
            _warned.add(tenant_id)
            log.warning("the audit tree of tenant %s cannot grow: its stored tiles are not "
                        "those of its first %s rows", tenant_id, tree_size)
        return tree_size
