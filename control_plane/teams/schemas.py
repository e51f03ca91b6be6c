"""Teams as a resource: what ``PUT /v1/teams/{team_id}`` takes and what it answers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ..kit import PLAIN_TEXT

TeamName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1,
                                            max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
AgentRef = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=PLAIN_TEXT)]
MAX_MEMBERS = 1000


class TeamIn(BaseModel):
    """A PUT replaces the team: its name and its whole list of member agents."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"name": "Support", "agents": ["support-bot", "triage-bot"]}]})

    name: TeamName | None = Field(None, description="A display name (plain text); left out: "
                                  "none.")
    agents: list[AgentRef] = Field(
        max_length=MAX_MEMBERS, description="The member agents' ids (as agent keys and "
        "memories name them), up to 1000; [] leaves the team without members. An agent key "
        "with one of these agent ids reads and writes the team's memory (scope team, scope "
        "ref the team id) without a grant in its scopes.")


class TeamOut(BaseModel):
    team_id: str = Field(description="The team's id: the scope ref of its memory "
                         "(team/{team_id}).")
    name: str | None = Field(description="Its display name.")
    agents: list[str] = Field(description="Its member agents' ids, sorted.")
    created_at: datetime = Field(description="When the team was first set up (UTC).")
    updated_at: datetime = Field(description="When it last changed (UTC).")


class TeamPage(BaseModel):
    items: list[TeamOut] = Field(description="Teams ordered by team id.")
    next_cursor: str | None = Field(description="Pass back as cursor for the next page; null "
                                    "at the end.")
