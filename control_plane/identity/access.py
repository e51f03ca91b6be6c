"""What a key may see: the access list of a scoped agent key, the teams of its agent, the
one data subject of a user key — checked in one place.

A key without a list sees the whole tenant. A scoped key sees only the (scope, scope ref)
pairs on its list, ``*`` standing for any ref of a scope — and, if it carries an agent id,
the memory of every team that agent is a member of (``team``/team id). Membership is never
held here (this object is cached with the key for a few seconds): ``may`` asks the database
for one address, ``where`` adds it to a list query as a subquery, so a member removed is
refused from the next request on, on every replica. A data subject's own key (role ``user``)
sees the ``user`` scope of its subject, and whatever memory names its subject as user id.

Every route that touches memories (events, entries, search, conversations) asks ``may`` for
one address, or adds ``where`` to its list query, and answers 404 for what the key may not
see — exactly as for a missing memory, so a scoped key learns nothing about what lies outside
its list (the audited refusal is ``control_plane.tenants.access.ensure_visible``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, select
from sqlalchemy.orm import Session

from ..db.models import TeamMember
from ..errors import Forbidden

ANY_REF = "*"
TENANT_REF = "-"


def canonical_scope(scope: str) -> str:
    return "tenant" if scope == "institutional" else scope


@dataclass(frozen=True)
class Grant:
    scope: str  # canonical: institutional is stored as tenant
    scope_ref: str  # or ANY_REF

    def covers(self, scope: str, scope_ref: str) -> bool:
        return self.scope == canonical_scope(scope) and self.scope_ref in (ANY_REF, scope_ref)


@dataclass(frozen=True)
class Access:
    """``grants`` None: the whole tenant. ``agent_id``: whom writes are recorded for.
    ``user_id``: the data subject of a user key (it sees that subject only). ``tenant_id``:
    the key's tenant, where its agent's team memberships are looked up."""

    grants: tuple[Grant, ...] | None = None
    agent_id: str | None = None
    tenant_id: uuid.UUID | None = None
    user_id: str | None = None

    @property
    def scoped(self) -> bool:
        return self.grants is not None or self.user_id is not None

    @property
    def teams(self) -> bool:
        """Whether the key may reach team memory through its agent's memberships."""
        return (self.grants is not None and self.agent_id is not None
                and self.tenant_id is not None and self.user_id is None)

    def allows(self, scope: str, scope_ref: str) -> bool:
        """Whether the key's own list covers the address (its teams aside: ``may``)."""
        if self.user_id is not None:
            return canonical_scope(scope) == "user" and scope_ref == self.user_id
        if self.grants is None:
            return True
        return any(g.covers(scope, scope_ref) for g in self.grants)

    def may(self, session: Session, scope: str, scope_ref: str,
            user_id: str | None = None) -> bool:
        """Whether the key may see or touch memory of ``scope``/``scope_ref`` (``user_id``:
        the data subject of the item, when known): its list, else one indexed lookup of its
        agent's membership in the team."""
        if self.allows(scope, scope_ref):
            return True
        if self.user_id is not None:
            return user_id is not None and user_id == self.user_id
        if not self.teams or canonical_scope(scope) != "team":
            return False
        return session.scalar(select(TeamMember.id).where(
            TeamMember.tenant_id == self.tenant_id, TeamMember.agent_id == self.agent_id,
            TeamMember.team_id == scope_ref).limit(1)) is not None

    def writes_for(self, user_id: str | None) -> str | None:
        """The user id a write records: a user key's own subject (another is refused), else
        what the write names."""
        if self.user_id is None or user_id in (None, self.user_id):
            return self.user_id if self.user_id is not None else user_id
        raise Forbidden(f"this key writes for its own data subject only; leave user_id out "
                        f"or send {self.user_id!r}")

    def team_refs(self) -> Any:
        """The subquery of the team ids the key's agent belongs to."""
        return select(TeamMember.team_id).where(TeamMember.tenant_id == self.tenant_id,
                                                TeamMember.agent_id == self.agent_id)

    def where(self, scope_column: Any, scope_ref_column: Any,
              user_column: Any = None) -> ColumnElement[bool] | None:
        """The SQL condition for rows this key may see; None when it sees everything.
        ``user_column``: the rows' data subject, for a user key (without it, a user key sees
        only its subject's ``user`` scope)."""
        if self.user_id is not None:
            own = and_(scope_column == "user", scope_ref_column == self.user_id)
            return own if user_column is None else or_(own, user_column == self.user_id)
        if self.grants is None:
            return None
        terms = [scope_column == g.scope if g.scope_ref == ANY_REF
                 else and_(scope_column == g.scope, scope_ref_column == g.scope_ref)
                 for g in self.grants]
        if self.teams:
            terms.append(and_(scope_column == "team", scope_ref_column.in_(self.team_refs())))
        return or_(*terms) if terms else false()

    @classmethod
    def of(cls, scopes: list[dict[str, str]] | None, agent_id: str | None,
           tenant_id: uuid.UUID | None = None, user_id: str | None = None) -> Access:
        """From the key's stored access list."""
        if scopes is None:
            return cls(None, agent_id, tenant_id, user_id)
        return cls(tuple(Grant(s["scope"], s["scope_ref"]) for s in scopes), agent_id,
                   tenant_id, user_id)


EVERYTHING = Access()
