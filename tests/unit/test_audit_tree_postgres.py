"""The audit tree's PostgreSQL-only path (``control_plane/audit/tree.py``): while no tile
fills, ``append`` grows the right-edge level-0 tile in one statement (``||``) with no read,
and refuses, writing nothing, when the stored tile does not hold the size's hashes. Runs with
``--noconftest`` on a throwaway cluster of its own (or ``MEMPLANE_TEST_DATABASE_URL``)."""

from __future__ import annotations

import pytest
from sqlalchemy import event, update

from control_plane.audit import tree
from control_plane.db.engine import begin_write
from control_plane.db.models import AuditHead, AuditTile
from tests.unit.checkpoint_world import World, postgres_cluster, postgres_world
from tests.unit.test_audit_tree_cases import LEAVES, _grow, _stored, expected_tiles, mth

cluster = pytest.fixture(scope="module")(postgres_cluster)
world = pytest.fixture(postgres_world)


def test_appends_within_a_tile_grow_it_in_one_statement_without_a_read(world: World) -> None:
    statements: list[str] = []
    event.listen(world.engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2].split()[0]))
    size, seen = 0, []
    for step in (3, 1, 250, 1, 1, 5, 253, 2):
        with world.sessions() as session:
            begin_write(session)
            statements.clear()
            grown = tree.append(session, world.tenant, size, LEAVES[size:size + step])
            seen.append(list(statements))
            session.execute(update(AuditHead).where(AuditHead.tenant_id == world.tenant)
                            .values(tree_size=grown))
            session.commit()
        assert grown == size + step
        size = grown
        assert _stored(world) == expected_tiles(size), size
    assert seen == [["INSERT"], ["UPDATE"], ["UPDATE"], ["UPDATE"], ["SELECT", "INSERT"],
                    ["INSERT"], ["SELECT", "INSERT"], ["UPDATE"]]
    with world.sessions() as session:
        assert tree.head(session, world.tenant) == (516, mth(0, 516))


@pytest.mark.parametrize("hashes", [3, 5])
def test_a_tile_that_disagrees_with_the_size_is_refused_and_left(world: World,
                                                                  hashes: int) -> None:
    _grow(world, 0, LEAVES[:260])
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AuditTile).where(AuditTile.tenant_id == world.tenant,
                                                AuditTile.level == 0, AuditTile.idx == 1)
                        .values(hashes=b"".join(LEAVES[256:256 + hashes])))
        session.commit()
    before = _stored(world)
    with world.sessions() as session:
        begin_write(session)
        with pytest.raises(tree.TreeError) as raised:
            tree.append(session, world.tenant, 260, LEAVES[260:262])
        assert str(raised.value) == ("tile 0/1 does not hold the hashes of a tree of 260 "
                                     "leaves")
        session.commit()
    assert _stored(world) == before
