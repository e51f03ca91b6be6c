"""A row read again under its lock is read as it is now, not as this session first loaded
it: sessions keep their objects across commits (``expire_on_commit=False``), and a plain
``SELECT … FOR UPDATE`` of an object already loaded leaves its old attributes in place —
an update built on them would undo what another request committed meanwhile. Teams, agents
and retention policies; holds, conversations and memory pointers read theirs the same way."""

from __future__ import annotations

from sqlalchemy import update

from control_plane.agents import repository as agents
from control_plane.db.models import AgentSettings, RetentionPolicy, Team
from control_plane.retention import repository as retention
from control_plane.teams import repository as teams
from tests.support.service import ServiceWorld


def _change_elsewhere(world: ServiceWorld, statement: object) -> None:
    with world.runtime.sessions() as other:
        other.execute(statement)  # type: ignore[call-overload]
        other.commit()


def test_a_team_read_under_its_lock_is_fresh(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        session.add(Team(tenant_id=world.tenant_id, team_id="t-1", name="before"))
        session.commit()
        assert teams.get(session, world.tenant_id, "t-1").name == "before"  # type: ignore[union-attr]
        session.commit()
        _change_elsewhere(world, update(Team).where(Team.tenant_id == world.tenant_id)
                          .values(name="after"))
        locked = teams.get(session, world.tenant_id, "t-1", lock=True)
        assert locked is not None and locked.name == "after"


def test_an_agent_read_under_its_lock_is_fresh(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        session.add(AgentSettings(tenant_id=world.tenant_id, agent_id="a-1", name="before"))
        session.commit()
        assert agents.get(session, world.tenant_id, "a-1").name == "before"  # type: ignore[union-attr]
        session.commit()
        _change_elsewhere(world, update(AgentSettings)
                          .where(AgentSettings.tenant_id == world.tenant_id)
                          .values(name="after"))
        locked = agents.get(session, world.tenant_id, "a-1", lock=True)
        assert locked is not None and locked.name == "after"


def test_a_retention_policy_found_under_its_lock_is_fresh(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        session.add(RetentionPolicy(tenant_id=world.tenant_id, scope_type="user",
                                    memory_type="*", retention_days=30, auto_delete=True))
        session.commit()
        found = retention.find(session, world.tenant_id, "user", "*")
        assert found is not None and found.retention_days == 30
        session.commit()
        _change_elsewhere(world, update(RetentionPolicy)
                          .where(RetentionPolicy.tenant_id == world.tenant_id)
                          .values(retention_days=7))
        again = retention.find(session, world.tenant_id, "user", "*")
        assert again is not None and again.retention_days == 7
