"""The audit chain's PostgreSQL-only paths (``control_plane/audit/service.py``): a round's
links written in one statement (``_LINK_MANY``: the first row's seq and the head's hash, the
rest chained by position) and the verifying walk on a connection of its own in one snapshot.
Runs with ``--noconftest`` on a throwaway cluster of its own (or
``MEMPLANE_TEST_DATABASE_URL``), with the tests of ``test_audit_seal_verify_cases.py``."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update

from control_plane.audit import service as audit
from control_plane.db.models import AccessLog
from tests.support.postgres import ExternalPostgres, PostgresCluster, _session_cluster
from tests.unit.checkpoint_world import World, make_world
from tests.unit.test_audit_seal_verify_cases import (
    add,
    assert_sealed_in_order,
    change,
    verify,
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster | ExternalPostgres]:
    yield from _session_cluster(False, "MEMPLANE_TEST_DATABASE_URL")


@pytest.fixture
def world(cluster: PostgresCluster | ExternalPostgres, tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, database_url=cluster.create_database(),
                          server_key=secrets.token_hex(32))


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
