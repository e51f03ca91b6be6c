"""Teams: a tenant's named groups of agents. A member agent's scoped key reaches the team's
memory (scope ``team``, scope ref the team id) without a grant of its own; membership is
read from here at request time, never cached (control_plane.identity.Access)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from ..base import Base, UTCDateTime, new_id, utcnow


class Team(Base):
    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("tenant_id", "team_id"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    team_id: Mapped[str] = mapped_column(String(256))  # the caller's id, plain text
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TeamMember(Base):
    """One agent of one team. Looked up by (tenant, agent) on every request of a scoped
    member's key, hence the index that leads with the agent."""

    __tablename__ = "team_members"
    __table_args__ = (UniqueConstraint("tenant_id", "team_id", "agent_id"),
                      Index(None, "tenant_id", "agent_id", "team_id"))

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=new_id)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    team_id: Mapped[str] = mapped_column(String(256))
    agent_id: Mapped[str] = mapped_column(String(256))
