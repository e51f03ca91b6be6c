"""Agents as a resource, with the seed's per-agent memory settings.

``PUT /v1/agents/{agent_id}`` records an agent's name and its user-memory settings:
whether it may write user memories, their retention (``"90d"``) and the storage
configuration they go to. The write path reads these through ``DataPlane.for_memory``
(cached per agent for a few seconds like the active configuration; a change made through
this process is seen at once). Memories already written stay where they are: each pointer
names its storage configuration, so reads, export and erasure find them wherever they live.

Admin keys change agents; every caller may read them, but an agent key that carries an
agent id sees only its own agent (others answer 404, as for scoped memories).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from ..audit import service as audit
from ..audit.service import audited
from ..db.base import utcnow
from ..db.engine import begin_write
from ..db.models import AgentSettings
from ..errors import InvalidInput, NotFound
from ..identity import Actor, Caller
from ..kit import decode_cursor, encode_cursor, page_limit
from ..plane.data_plane import DataPlane, parse_public_id, public_id
from ..storage_config import repository as configs
from . import repository as repo
from .schemas import RETENTION, AgentIn, AgentMemoryOut, AgentOut, AgentPage, UserMemoryOut


def put_agent(session: Session, plane: DataPlane, actor: Actor, agent_id: str,
              body: AgentIn) -> AgentOut:
    """Create or replace the agent's settings."""
    with audited(session, actor, "agent_update", detail=f"agent {agent_id}"):
        user_memory = body.memory.user_memory
        config_id = None
        if user_memory.storage_config_id is not None:
            config_id = parse_public_id(user_memory.storage_config_id)
        retention_days = None
        if user_memory.retention is not None:
            match = RETENTION.fullmatch(user_memory.retention)
            assert match is not None  # the schema's pattern
            retention_days = int(match.group(1))
        begin_write(session)
        if config_id is not None and configs.get_listed(session, actor.tenant_id,
                                                        config_id) is None:
            raise InvalidInput(
                f"memory.user_memory.storage_config_id {public_id(config_id)} is not one of "
                "the tenant's storage configurations (see GET /v1/storage/configs)",
                problem="unknown_storage_config")
        now = utcnow()
        agent = repo.get(session, actor.tenant_id, agent_id, lock=True)
        if agent is None:
            agent = AgentSettings(tenant_id=actor.tenant_id, agent_id=agent_id, created_at=now)
            session.add(agent)
        agent.name = body.name
        agent.user_memory_enabled = user_memory.enabled
        agent.user_memory_retention_days = retention_days
        agent.user_memory_storage_config_id = config_id
        agent.updated_at = now
        session.flush()
        audit.record(session, actor, "agent_update",
                     detail=f"agent {agent_id}: user_memory enabled={user_memory.enabled} "
                            f"retention_days={retention_days} storage_config="
                            f"{public_id(config_id) if config_id else 'default'}")
        answer = _out(agent)
        session.commit()
    plane.forget_agent(actor.tenant_id, agent_id)
    return answer


def only_own(caller: Caller) -> str | None:
    """The one agent an agent key with an agent id may see (None: every agent)."""
    return caller.access.agent_id if caller.role == "agent" else None


def get_agent(session: Session, actor: Actor, agent_id: str, *,
              only: str | None = None) -> AgentOut:
    with audited(session, actor, "agent_read", detail=f"agent {agent_id}"):
        agent = repo.get(session, actor.tenant_id, agent_id)
        if agent is None or only not in (None, agent_id):
            raise NotFound(f"no agent {agent_id!r}; create it with PUT /v1/agents/{{agent_id}}")
        answer = _out(agent)
        session.commit()
        begin_write(session)
        audit.record(session, actor, "agent_read", detail=f"agent {agent_id}")
        session.commit()
        return answer


def list_agents(session: Session, actor: Actor, *, limit: int | None, cursor: str | None,
                only: str | None = None) -> AgentPage:
    with audited(session, actor, "agent_read", detail="list"):
        size = page_limit(limit)
        after = None
        if cursor is not None:
            after = decode_cursor(cursor)
            if not isinstance(after, str):
                raise InvalidInput("cursor is not valid; pass the next_cursor value of the "
                                   "previous page unchanged")
        rows = list(repo.page(session, actor.tenant_id, after=after, limit=size + 1,
                              only=only))
        next_cursor = encode_cursor(rows[size - 1].agent_id) if len(rows) > size else None
        items = [_out(agent) for agent in rows[:size]]
        session.commit()
        begin_write(session)
        audit.record(session, actor, "agent_read", detail=f"list: {len(items)} agent(s)")
        session.commit()
        return AgentPage(items=items, next_cursor=next_cursor)


def delete_agent(session: Session, plane: DataPlane, actor: Actor, agent_id: str) -> None:
    """Forget the agent's settings (its memories stay; its user memories go to the default
    again and are enabled)."""
    with audited(session, actor, "agent_delete", detail=f"agent {agent_id}"):
        begin_write(session)
        agent = repo.get(session, actor.tenant_id, agent_id, lock=True)
        if agent is None:
            raise NotFound(f"no agent {agent_id!r}")
        session.delete(agent)
        audit.record(session, actor, "agent_delete", detail=f"agent {agent_id}")
        session.commit()
    plane.forget_agent(actor.tenant_id, agent_id)


def _out(agent: AgentSettings) -> AgentOut:
    days = agent.user_memory_retention_days
    config_id = agent.user_memory_storage_config_id
    return AgentOut(
        agent_id=agent.agent_id, name=agent.name, created_at=agent.created_at,
        updated_at=agent.updated_at,
        memory=AgentMemoryOut(user_memory=UserMemoryOut(
            enabled=agent.user_memory_enabled,
            retention=f"{days}d" if days is not None else None, retention_days=days,
            storage_config_id=public_id(config_id) if config_id is not None else None)))
