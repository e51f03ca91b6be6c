"""Team rows: one per (tenant, team id), and one member row per (team, agent)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..db.models import Team, TeamMember


def get(session: Session, tenant_id: uuid.UUID, team_id: str, *,
        lock: bool = False) -> Team | None:
    query = select(Team).where(Team.tenant_id == tenant_id, Team.team_id == team_id)
    if lock:  # read again: the session keeps objects across commits (expire_on_commit=False)
        query = query.with_for_update().execution_options(populate_existing=True)
    return session.scalar(query)


def page(session: Session, tenant_id: uuid.UUID, *, after: str | None, limit: int,
         member: str | None = None) -> Sequence[Team]:
    """Teams by id; with ``member``, only those that agent belongs to."""
    query = select(Team).where(Team.tenant_id == tenant_id)
    if member is not None:
        query = query.where(Team.team_id.in_(select(TeamMember.team_id).where(
            TeamMember.tenant_id == tenant_id, TeamMember.agent_id == member)))
    if after is not None:
        query = query.where(Team.team_id > after)
    return session.scalars(query.order_by(Team.team_id).limit(limit)).all()


def members(session: Session, tenant_id: uuid.UUID,
            team_ids: Sequence[str]) -> dict[str, list[str]]:
    """The member agents of each of ``team_ids``, sorted (one query)."""
    found: dict[str, list[str]] = {team_id: [] for team_id in team_ids}
    if not team_ids:
        return found
    rows = session.execute(select(TeamMember.team_id, TeamMember.agent_id).where(
        TeamMember.tenant_id == tenant_id, TeamMember.team_id.in_(list(team_ids)))
        .order_by(TeamMember.team_id, TeamMember.agent_id))
    for team_id, agent_id in rows:
        found[team_id].append(agent_id)
    return found


def replace_members(session: Session, tenant_id: uuid.UUID, team_id: str,
                    agents: Sequence[str]) -> None:
    session.execute(delete(TeamMember).where(TeamMember.tenant_id == tenant_id,
                                             TeamMember.team_id == team_id))
    session.add_all([TeamMember(tenant_id=tenant_id, team_id=team_id, agent_id=agent_id)
                     for agent_id in agents])
