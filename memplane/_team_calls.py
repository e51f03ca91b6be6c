"""Request builders and the model for teams (``/v1/teams``).

Like ``_config_calls.py`` they only describe an exchange (a ``Call``); the sync and async
clients send them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ._base import Call, _without_none, parse_model, parse_nothing, path_segment, query_params
from ._models import Page, _Model


class Team(_Model):
    """A team: its member agents read and write its memory (scope ``team``, scope ref the
    team id) without a grant of their own."""

    team_id: str
    name: str | None = None
    agents: list[str] = []
    created_at: datetime
    updated_at: datetime


def _team_id(value: str) -> str:
    return path_segment(str(value), name="team_id")


def team_put(team_id: str, *, agents: Iterable[str], name: str | None) -> Call[Team]:
    if isinstance(agents, str):
        raise TypeError("agents is a list of agent ids, not one string")
    body = _without_none({"name": name}) | {"agents": list(agents)}
    return Call("PUT", f"/v1/teams/{_team_id(team_id)}", parse_model(Team), json=body)


def team_get(team_id: str) -> Call[Team]:
    return Call("GET", f"/v1/teams/{_team_id(team_id)}", parse_model(Team))


def team_list(*, limit: int | None, cursor: str | None) -> Call[Page[Team]]:
    return Call("GET", "/v1/teams", parse_model(Page[Team]),
                params=query_params(limit=limit, cursor=cursor))


def team_delete(team_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/teams/{_team_id(team_id)}", parse_nothing)
