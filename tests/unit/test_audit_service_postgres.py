"""The audit chain's PostgreSQL-only paths (``control_plane/audit/service.py``): a round's
links written in one statement (``_LINK_MANY``: the first row's seq and the head's hash, the
rest chained by position) and the verifying walk on a connection of its own in one snapshot.
Runs with ``--noconftest`` on a throwaway cluster of its own (or
``MEMPLANE_TEST_DATABASE_URL``), with the tests of ``test_audit_seal_verify_cases.py``."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from control_plane.audit import service as audit
from control_plane.db.models import AccessLog
from tests.unit.checkpoint_world import World, postgres_cluster, postgres_world
from tests.unit.test_audit_seal_verify_cases import (
    add,
    assert_sealed_in_order,
    change,
    verify,
)

cluster = pytest.fixture(scope="module")(postgres_cluster)
world = pytest.fixture(postgres_world)


def test_rounds_of_links_written_in_one_statement_chain_in_order(world: World) -> None:
    assert world.engine.dialect.name == "postgresql"
    add(world, ["a", "b", "c"])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant) == 3
    assert_sealed_in_order(world, ["a", "b", "c"])
    add(world, [str(i) for i in range(5)])
    with world.sessions() as session:
        assert audit.seal(session, world.tenant, batch=2) == 5
    assert_sealed_in_order(world, ["a", "b", "c", "0", "1", "2", "3", "4"])
    assert verify(world) == audit.Verification(True, 8, 0, None, head_seq=8)


def test_the_snapshot_walk_names_an_edited_row(world: World) -> None:
    add(world, ["a", "b", "c"])
    with world.sessions() as session:
        audit.seal(session, world.tenant)
    change(world, update(AccessLog).where(AccessLog.seq == 2).values(detail="edited"))
    assert verify(world) == audit.Verification(
        False, 1, 0, 2, "row 2 was changed after it was sealed", head_seq=3)
