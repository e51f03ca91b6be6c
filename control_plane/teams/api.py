"""What other domains use of teams: the teams an agent belongs to (for instance, the team
memories a conversation's context searches by default)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import TeamMember


def team_ids_of(session: Session, tenant_id: uuid.UUID, agent_id: str) -> list[str]:
    """The ids of the tenant's teams ``agent_id`` is a member of, sorted; read from the
    database each call (one indexed query), so a removed member is out at once."""
    rows = session.scalars(select(TeamMember.team_id).where(
        TeamMember.tenant_id == tenant_id, TeamMember.agent_id == agent_id))
    return sorted(set(rows))
