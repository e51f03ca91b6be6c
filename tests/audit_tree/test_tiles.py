"""The audit tree's tiles on SQLite and PostgreSQL: exactly the C2SP tiles of the tree over
the rows' leaves, across tile boundaries (a full level-0 tile, a full level-1 tile at 65,536
leaves), grown batch by batch, built for rows sealed before the tree existed (and resumed
after a crash), stopped below a broken chain; and each proof one query of a few tiles."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from control_plane.audit import service as audit
from control_plane.audit import transparency, tree
from control_plane.audit.leaves import leaf_bytes
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditHead, AuditTile
from control_plane.identity import Actor
from control_plane.tlog import merkle
from tests.support.service import ServiceWorld, SimulatedCrash


def _add(world: ServiceWorld, n: int, start: int = 0) -> None:
    """``n`` unsealed rows in one executemany (the fast path to many leaves)."""
    with world.runtime.sessions() as session:
        begin_write(session)
        audit.record_many(session, Actor(world.tenant_id, "api", "tree-test"), "write",
                          [(None, f"row {start + i} ü") for i in range(n)])
        session.commit()


def _leaves(session: Session, tenant_id: uuid.UUID) -> list[bytes]:
    rows = session.scalars(select(AccessLog).where(AccessLog.tenant_id == tenant_id,
                                                   AccessLog.seq.is_not(None))
                           .order_by(AccessLog.seq)).all()
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    return [leaf_bytes(r) for r in rows]


def _expected_tiles(leaves: list[bytes]) -> dict[tuple[int, int], bytes]:
    """The C2SP tiles of the tree over ``leaves``, computed from nothing else."""
    tiles: dict[tuple[int, int], bytes] = {}
    level, hashes = 0, [merkle.leaf_hash(leaf) for leaf in leaves]
    while hashes:
        for start in range(0, len(hashes), 256):
            tiles[(level, start // 256)] = b"".join(hashes[start:start + 256])
        hashes = [_root(hashes[i:i + 256]) for i in range(0, len(hashes) - 255, 256)]
        level += 1
    return tiles


def _root(hashes: list[bytes]) -> bytes:
    while len(hashes) > 1:
        hashes = [merkle.node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


def _stored_tiles(session: Session, tenant_id: uuid.UUID) -> dict[tuple[int, int], bytes]:
    rows = session.execute(select(AuditTile.level, AuditTile.idx, AuditTile.hashes)
                           .where(AuditTile.tenant_id == tenant_id)).all()
    return {(int(lv), int(i)): bytes(h) for lv, i, h in rows}


def _sizes(session: Session, tenant_id: uuid.UUID) -> tuple[int, int]:
    head = session.execute(select(AuditHead.last_seq, AuditHead.tree_size)
                           .where(AuditHead.tenant_id == tenant_id)).one()
    return int(head[0]), int(head[1])


@pytest.fixture
def session(world: ServiceWorld) -> Iterator[Session]:
    with world.runtime.sessions() as s:
        yield s


def _rows(session: Session, tenant_id: uuid.UUID) -> int:
    """The tenant's rows so far (its creation left one)."""
    count = session.scalar(select(func.count()).select_from(AccessLog)
                           .where(AccessLog.tenant_id == tenant_id))
    session.rollback()
    return int(count or 0)


@pytest.mark.slow
def test_tiles_across_the_level_one_and_level_two_boundaries(world: ServiceWorld,
                                                             session: Session) -> None:
    tid = world.tenant_id
    first = 65536 + 44
    _add(world, first - _rows(session, tid))
    assert audit.seal(session, tid) == first
    old_size, old_root = tree.head(session, tid)
    _add(world, 261, start=first)
    assert audit.seal(session, tid, batch=100) == 261  # three batches, one crossing a tile
    n = first + 261
    leaves = _leaves(session, tid)
    stored = _stored_tiles(session, tid)

    assert _sizes(session, tid) == (n, n)
    assert stored == _expected_tiles(leaves)
    assert sorted((lv, i, len(h) // 32) for (lv, i), h in stored.items()
                  if lv > 0 or i >= 256) == [(0, 256, 256), (0, 257, 49), (1, 0, 256),
                                             (1, 1, 1), (2, 0, 1)]
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    roots = {size: _root_of(hashes[:size]) for size in (1, 256, 300, 65536, old_size, n)}
    assert stored[(2, 0)] == roots[65536] == merkle.root_of_leaves(leaves[:65536])
    assert (old_size, old_root) == (first, roots[first])
    assert tree.head(session, tid) == (n, roots[n])

    for size in (n, old_size):
        for seq in (1, 256, 257, 65536, 65537, size):
            reader = tree.Reader(session, tid)
            proof = merkle.inclusion_proof(seq - 1, size, reader)
            assert proof == tree.inclusion(session, tid, seq, size)
            assert merkle.verify_inclusion(hashes[seq - 1], seq - 1, size, proof, roots[size])
            assert (reader.queries, reader.tiles_read <= 6) == (1, True)
    for small in (1, 256, 300, 65536, old_size):
        proof = tree.consistency(session, tid, small, n)
        assert merkle.verify_consistency(small, n, roots[small], roots[n], proof)


def _root_of(hashes: list[bytes]) -> bytes:
    """RFC 9162's head of these leaf hashes (its recursion, as ``merkle.root_of_leaves``)."""
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return merkle.node_hash(_root_of(hashes[:k]), _root_of(hashes[k:]))


def test_rows_sealed_a_few_at_a_time_make_the_same_tiles(world: ServiceWorld,
                                                         session: Session) -> None:
    tid = world.tenant_id
    added = _rows(session, tid)
    for n, batch in ((1, 5000), (255, 97), (1, 1), (300, 97), (7, 3), (200, 5000)):
        _add(world, n, start=added)
        added += n
        audit.seal(session, tid, batch=batch)
        leaves = _leaves(session, tid)
        assert _sizes(session, tid) == (added, added)
        assert _stored_tiles(session, tid) == _expected_tiles(leaves)
        assert tree.head(session, tid) == (added, merkle.root_of_leaves(leaves))


def test_a_tenant_sealed_before_the_tree_gets_it_built_and_a_crash_resumes(
        world: ServiceWorld, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    tid = world.tenant_id
    _add(world, 700 - _rows(session, tid))
    audit.seal(session, tid, with_tree=False)  # as sealed before the tree existed
    assert _sizes(session, tid) == (700, 0)
    assert _stored_tiles(session, tid) == {}
    with pytest.raises(merkle.ProofError):
        tree.inclusion(session, tid, 1, 700)
    session.rollback()
    _add(world, 5, start=700)

    appended = tree.append
    calls = []

    def crash_on_the_third(*args: object, **kwargs: object) -> int:
        calls.append(1)
        if len(calls) == 3:
            raise SimulatedCrash("mid-build")
        return appended(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tree, "append", crash_on_the_third)
    with world.runtime.sessions() as crashing, pytest.raises(SimulatedCrash):
        audit.seal(crashing, tid, batch=300)
    monkeypatch.setattr(tree, "append", appended)
    assert _sizes(session, tid) == (700, 600)  # two batches committed, the third not
    session.rollback()

    assert audit.seal_all(session) >= 5  # the sealer resumes the build, then seals the new
    leaves = _leaves(session, tid)
    assert _sizes(session, tid) == (705, 705)
    assert _stored_tiles(session, tid) == _expected_tiles(leaves)


def test_the_tree_stops_below_a_broken_chain_and_sealing_goes_on(world: ServiceWorld,
                                                                 session: Session) -> None:
    tid = world.tenant_id
    _add(world, 10 - _rows(session, tid))
    audit.seal(session, tid, with_tree=False)
    begin_write(session)
    session.execute(update(AccessLog).where(AccessLog.tenant_id == tid, AccessLog.seq == 5)
                    .values(detail="nothing happened"))
    session.commit()
    _add(world, 3, start=10)
    assert audit.seal(session, tid) == 3
    assert _sizes(session, tid) == (13, 4)
    assert tree.head(session, tid)[0] == 4
    with pytest.raises(merkle.ProofError, match="tree_size 5 is beyond the log's 4 sealed rows"):
        tree.inclusion(session, tid, 1, 5)
    assert audit.verify(session, tid).first_bad_seq == 5


def test_altered_tiles_never_stop_sealing_and_proofs_say_so(world: ServiceWorld,
                                                            session: Session) -> None:
    tid = world.tenant_id
    _add(world, 40 - _rows(session, tid))
    audit.seal(session, tid)
    begin_write(session)
    session.execute(update(AuditTile).where(AuditTile.tenant_id == tid, AuditTile.level == 0,
                                            AuditTile.idx == 0)
                    .values(hashes=bytes(32 * 39)))  # one hash short
    session.commit()
    _add(world, 5, start=40)
    assert audit.seal(session, tid) == 5
    assert _sizes(session, tid) == (45, 40)
    with pytest.raises(tree.TreeError, match="the tree's tiles lack node"):
        tree.inclusion(session, tid, 39, 40)  # its sibling, leaf 39, is gone
    session.rollback()
    with pytest.raises(transparency.TreeDamaged) as damaged:
        transparency.inclusion_as(session, world.runtime.plane, world.actor, 39, 40)
    assert (damaged.value.status_code, damaged.value.code, str(damaged.value)) == (
        409, "audit_tree_damaged", "the audit log's stored tree is damaged (the tree's tiles "
        "lack node (0, 39)); it was altered in the database")
