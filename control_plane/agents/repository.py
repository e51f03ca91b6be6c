"""Agent rows: one per (tenant, agent id)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.models import AgentSettings


def get(session: Session, tenant_id: uuid.UUID, agent_id: str, *,
        lock: bool = False) -> AgentSettings | None:
    query = select(AgentSettings).where(AgentSettings.tenant_id == tenant_id,
                                        AgentSettings.agent_id == agent_id)
    if lock:  # read again: the session keeps objects across commits (expire_on_commit=False)
        query = query.with_for_update().execution_options(populate_existing=True)
    return session.scalar(query)


def page(session: Session, tenant_id: uuid.UUID, *, after: str | None, limit: int,
         only: str | None = None) -> Sequence[AgentSettings]:
    query = select(AgentSettings).where(AgentSettings.tenant_id == tenant_id)
    if only is not None:
        query = query.where(AgentSettings.agent_id == only)
    if after is not None:
        query = query.where(AgentSettings.agent_id > after)
    return session.scalars(query.order_by(AgentSettings.agent_id).limit(limit)).all()
