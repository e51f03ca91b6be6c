"""Read audit rows gathered by a request (``reads_committed_together``) on the service's own
database, SQLite and PostgreSQL: one commit when the block ends, before the caller answers.

The batcher's group commit itself (I6: no read answered without its durable row; the lead
handed on, a refused batch, a wait that runs out, a connection the server closed, the rows of
a batch as they land and the sealer's chain over them) is held at its checkpoints with no
server in ``tests/unit/test_audit_batcher_cases.py`` (SQLite) and
``tests/unit/test_audit_batcher_postgres.py`` (PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from control_plane.db.models import AccessLog
from tests.support.service import ServiceWorld


def test_reads_gathered_together_land_in_one_commit_when_the_block_ends(
        world: ServiceWorld) -> None:
    """Inside ``reads_committed_together`` an actor's read rows wait for the block's end (one
    commit, before the caller answers); another actor's land at once; rows gathered before an
    error land too."""
    from control_plane.audit import service as audit
    from control_plane.identity import Actor

    plane = world.runtime.plane
    me, other = world.actor, Actor(world.tenant_id, "api", "someone-else")

    def details() -> list[tuple[str, str]]:
        with world.runtime.sessions() as session:
            return [(r.accessor_id, r.detail) for r in session.execute(
                select(AccessLog.accessor_id, AccessLog.detail).where(
                    AccessLog.tenant_id == world.tenant_id,
                    AccessLog.operation.in_(["search", "read", "context"]))
                .order_by(AccessLog.id))]

    with world.runtime.sessions() as session:
        with audit.reads_committed_together(session, plane, me):
            audit.commit_reads(session, plane, me, [("search", None, "s1")])
            audit.commit_reads(session, plane, other, [("read", None, "theirs")])
            with audit.reads_committed_together(session, plane, me):  # nested: the outer
                audit.commit_reads(session, plane, me, [("read", None, "r1")])
            audit.commit_reads(session, plane, me, [("context", None, "c1")])
            inside = details()
        after = details()
        with pytest.raises(RuntimeError, match="assembly failed"):
            with audit.reads_committed_together(session, plane, me):
                audit.commit_reads(session, plane, me, [("read", None, "r2")])
                assert details() == after
                raise RuntimeError("assembly failed")
        failed = details()
    mine = me.accessor_id
    assert inside == [("someone-else", "theirs")]
    assert after == [("someone-else", "theirs"), (mine, "s1"), (mine, "r1"), (mine, "c1")]
    assert failed == after + [(mine, "r2")]
