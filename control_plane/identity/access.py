"""What a key may see: the access list of a scoped agent key, checked in one place.

A key without a list sees the whole tenant. A scoped key sees only the (scope, scope ref)
pairs on its list, ``*`` standing for any ref of a scope. Every route that touches memories
(and later events, entries, search, conversations) asks ``allows`` for one address, or adds
``where`` to its list query, and answers 404 for what the key may not see — exactly as for a
missing memory, so a scoped key learns nothing about what lies outside its list (the
audited refusal is ``control_plane.tenants.access.ensure_visible``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_

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
    """``grants`` None: the whole tenant. ``agent_id``: whom writes are recorded for."""

    grants: tuple[Grant, ...] | None = None
    agent_id: str | None = None

    @property
    def scoped(self) -> bool:
        return self.grants is not None

    def allows(self, scope: str, scope_ref: str) -> bool:
        if self.grants is None:
            return True
        return any(g.covers(scope, scope_ref) for g in self.grants)

    def where(self, scope_column: Any, scope_ref_column: Any) -> ColumnElement[bool] | None:
        """The SQL condition for rows this key may see; None when it sees everything."""
        if self.grants is None:
            return None
        terms = [scope_column == g.scope if g.scope_ref == ANY_REF
                 else and_(scope_column == g.scope, scope_ref_column == g.scope_ref)
                 for g in self.grants]
        return or_(*terms) if terms else false()

    @classmethod
    def of(cls, scopes: list[dict[str, str]] | None, agent_id: str | None) -> Access:
        """From the key's stored access list."""
        if scopes is None:
            return cls(None, agent_id)
        return cls(tuple(Grant(s["scope"], s["scope_ref"]) for s in scopes), agent_id)


EVERYTHING = Access()
