"""Teams as a resource: named groups of agents that share the team's memory.

``PUT /v1/teams/{team_id}`` records a team's name and its member agents (admin keys). An
agent key whose agent id is a member reads and writes ``team/{team_id}`` memory without a
grant of its own: the key's access (``control_plane.identity.Access``) asks the member rows
at request time, never a cache, so a member removed here is refused from its next request on,
on every replica. Deleting a team removes its members, not its memories.

Admin and compliance keys read every team; an agent key with an agent id reads only the
teams it belongs to (others answer 404, as a missing team); an agent key without one reads
them all.
"""

from __future__ import annotations

import unicodedata

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import Team
from ..errors import InvalidInput, NotFound
from ..identity import Actor, Caller
from ..kit import decode_cursor, encode_cursor, page_limit
from . import repository as repo
from .schemas import TeamIn, TeamOut, TeamPage


def member_of(caller: Caller) -> str | None:
    """The agent whose teams alone the caller may read (None: every team)."""
    return caller.access.agent_id if caller.role == "agent" else None


def _missing(team_id: str) -> NotFound:
    return NotFound(f"no team {team_id!r}; create it with PUT /v1/teams/{{team_id}}")


def put_team(session: Session, actor: Actor, team_id: str, body: TeamIn) -> TeamOut:
    """Create the team or replace its name and members."""
    team_id = unicodedata.normalize("NFC", team_id)
    with audited(session, actor, "team_update", detail=f"team {team_id}"):
        agents = sorted({unicodedata.normalize("NFC", a) for a in body.agents})
        begin_write(session)
        now = utcnow()
        team = repo.get(session, actor.tenant_id, team_id, lock=True)
        if team is None:
            team = Team(tenant_id=actor.tenant_id, team_id=team_id, created_at=now)
            session.add(team)
        team.name = body.name
        team.updated_at = now
        repo.replace_members(session, actor.tenant_id, team_id, agents)
        session.flush()
        audit.record(session, actor, "team_update",
                     detail=f"team {team_id}: {len(agents)} member agent(s)")
        answer = _out(team, agents)
        session.commit()
    return answer


def get_team(session: Session, actor: Actor, team_id: str, *,
             member: str | None = None) -> TeamOut:
    team_id = unicodedata.normalize("NFC", team_id)
    with audited(session, actor, "team_read", detail=f"team {team_id}"):
        team = repo.get(session, actor.tenant_id, team_id)
        if team is None:
            raise _missing(team_id)
        agents = repo.members(session, actor.tenant_id, [team_id])[team_id]
        if member is not None and member not in agents:
            raise _missing(team_id)
        answer = _out(team, agents)
        session.commit()
        begin_write(session)
        audit.record(session, actor, "team_read", detail=f"team {team_id}")
        session.commit()
        return answer


def list_teams(session: Session, actor: Actor, *, limit: int | None, cursor: str | None,
               member: str | None = None) -> TeamPage:
    with audited(session, actor, "team_read", detail="list"):
        size = page_limit(limit)
        after = None
        if cursor is not None:
            after = decode_cursor(cursor)
            if not isinstance(after, str):
                raise InvalidInput("cursor is not valid; pass the next_cursor value of the "
                                   "previous page unchanged")
        rows = list(repo.page(session, actor.tenant_id, after=after, limit=size + 1,
                              member=member))
        next_cursor = encode_cursor(rows[size - 1].team_id) if len(rows) > size else None
        rows = rows[:size]
        members = repo.members(session, actor.tenant_id, [team.team_id for team in rows])
        items = [_out(team, members[team.team_id]) for team in rows]
        session.commit()
        begin_write(session)
        audit.record(session, actor, "team_read", detail=f"list: {len(items)} team(s)")
        session.commit()
        return TeamPage(items=items, next_cursor=next_cursor)


def delete_team(session: Session, actor: Actor, team_id: str) -> None:
    """Forget the team and its members; its memories stay (admins still reach them, and a
    team made again under the same id gives its new members the same memory)."""
    team_id = unicodedata.normalize("NFC", team_id)
    with audited(session, actor, "team_delete", detail=f"team {team_id}"):
        begin_write(session)
        team = repo.get(session, actor.tenant_id, team_id, lock=True)
        if team is None:
            raise _missing(team_id)
        repo.replace_members(session, actor.tenant_id, team_id, [])
        session.delete(team)
        audit.record(session, actor, "team_delete", detail=f"team {team_id}")
        session.commit()


def _out(team: Team, agents: list[str]) -> TeamOut:
    return TeamOut(team_id=team.team_id, name=team.name, agents=agents,
                   created_at=team.created_at, updated_at=team.updated_at)
