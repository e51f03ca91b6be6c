from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from ..deps import AdminCaller, ReaderCaller, SessionDep
from ..kit import PLAIN_TEXT
from . import service as teams
from .schemas import TeamIn, TeamOut, TeamPage

router = APIRouter(tags=["teams"])

TeamId = Annotated[str, Path(min_length=1, max_length=256, pattern=PLAIN_TEXT,
                             description="The team's id: the scope ref of its memory "
                             "(team/{team_id}).")]


@router.put("/v1/teams/{team_id}", response_model=TeamOut)
def put_team(team_id: TeamId, body: TeamIn, caller: AdminCaller,
             session: SessionDep) -> TeamOut:
    """Create or replace a team: its name and its member agents. A member's agent key reads
    and writes the team's memory (`team/{team_id}`) without a grant in its scopes; an agent
    left out of `agents` loses that on its next request. Admin keys only."""
    return teams.put_team(session, caller.actor, team_id, body)


@router.get("/v1/teams", response_model=TeamPage)
def list_teams(caller: ReaderCaller, session: SessionDep,
               limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
               cursor: str | None = None) -> TeamPage:
    """The tenant's teams by id (an agent key with an agent id sees only its own teams)."""
    return teams.list_teams(session, caller.actor, limit=limit, cursor=cursor,
                            member=teams.member_of(caller))


@router.get("/v1/teams/{team_id}", response_model=TeamOut)
def get_team(team_id: TeamId, caller: ReaderCaller, session: SessionDep) -> TeamOut:
    """One team and its member agents (an agent key with an agent id sees only the teams it
    belongs to; others answer 404)."""
    return teams.get_team(session, caller.actor, team_id, member=teams.member_of(caller))


@router.delete("/v1/teams/{team_id}", status_code=204)
def delete_team(team_id: TeamId, caller: AdminCaller, session: SessionDep) -> Response:
    """Delete a team and its membership list; the team's memories stay where they are
    (admin keys still reach them). Admin keys only."""
    teams.delete_team(session, caller.actor, team_id)
    return Response(status_code=204)
