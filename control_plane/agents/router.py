from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from ..deps import AdminCaller, PlaneDep, ReaderCaller, SessionDep
from ..kit import PLAIN_TEXT
from . import service as agents
from .schemas import AgentIn, AgentOut, AgentPage

router = APIRouter(tags=["agents"])

AgentId = Annotated[str, Path(min_length=1, max_length=256, pattern=PLAIN_TEXT,
                              description="The agent's id, as memories and keys name it.")]


@router.put("/v1/agents/{agent_id}", response_model=AgentOut)
def put_agent(agent_id: AgentId, body: AgentIn, caller: AdminCaller, session: SessionDep,
              plane: PlaneDep) -> AgentOut:
    """Create or replace an agent's settings: its name and its user memory (`enabled`,
    `retention` like `"90d"`, `storage_config_id` — the seed's camelCase `userMemory` /
    `storageConfigId` is accepted). New user memories of the agent go to that storage
    configuration; a disabled user memory refuses writes. Admin keys only."""
    return agents.put_agent(session, plane, caller.actor, agent_id, body)


@router.get("/v1/agents", response_model=AgentPage)
def list_agents(caller: ReaderCaller, session: SessionDep,
                limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
                cursor: str | None = None) -> AgentPage:
    """The tenant's agents by id (an agent key with an agent id sees only its own)."""
    return agents.list_agents(session, caller.actor, limit=limit, cursor=cursor,
                              only=agents.only_own(caller))


@router.get("/v1/agents/{agent_id}", response_model=AgentOut)
def get_agent(agent_id: AgentId, caller: ReaderCaller, session: SessionDep) -> AgentOut:
    """One agent's settings (an agent key with an agent id sees only its own)."""
    return agents.get_agent(session, caller.actor, agent_id, only=agents.only_own(caller))


@router.delete("/v1/agents/{agent_id}", status_code=204)
def delete_agent(agent_id: AgentId, caller: AdminCaller, session: SessionDep,
                 plane: PlaneDep) -> Response:
    """Forget an agent's settings; its memories stay where they are. Admin keys only."""
    agents.delete_agent(session, plane, caller.actor, agent_id)
    return Response(status_code=204)
