"""Who is calling, and who did it: the caller an API key names, and the actor an audit row
records (an API key, or the system itself)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlalchemy import ColumnElement

from .access import EVERYTHING, Access


@dataclass(frozen=True)
class Actor:
    """Who did it: an API key, or the system itself (reconciler, GC, jobs)."""

    tenant_id: uuid.UUID
    accessor_type: str  # agent | user | system | api
    accessor_id: str
    agent_id: str | None = None  # the agent id of an agent key


@dataclass(frozen=True)
class Caller:
    tenant_id: uuid.UUID
    key_id: uuid.UUID
    role: str
    can_create_tenants: bool
    access: Access = EVERYTHING

    @cached_property
    def actor(self) -> Actor:
        """Agent keys are audited as ``agent`` with their agent id; a data subject's own key
        as ``user`` (the subject's id is not in the row: the key names it); admin and
        compliance keys as ``api``. The accessor id is always the key's id, so every row
        leads to a key. Made once per caller (an immutable one, kept between requests)."""
        if self.role == "user":
            return Actor(self.tenant_id, "user", f"key:{self.key_id}")
        if self.role == "agent":
            return Actor(self.tenant_id, "agent", f"key:{self.key_id}", self.access.agent_id)
        return Actor(self.tenant_id, "api", f"key:{self.key_id}")

    def may_access(self, scope: str, scope_ref: str) -> bool:
        """Whether this key's own list lets it see or touch memory of ``scope``/``scope_ref``
        (the teams of its agent are looked up at request time: ``access.may``)."""
        return self.access.allows(scope, scope_ref)

    def scope_filter(self, scope_column: Any, scope_ref_column: Any,
                     user_column: Any = None) -> ColumnElement[bool] | None:
        """The SQL condition a list query adds for this key (None: it sees everything)."""
        return self.access.where(scope_column, scope_ref_column, user_column)
