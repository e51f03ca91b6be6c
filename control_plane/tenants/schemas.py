from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..kit import PLAIN_TEXT
from ..memories.addresses import Scope

ScopeRef = Field(min_length=1, max_length=256, pattern=PLAIN_TEXT)


class TenantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=PLAIN_TEXT)


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: uuid.UUID
    name: str


class CreatedTenant(BaseModel):
    tenant: TenantOut
    api_key: str


class ScopeGrant(BaseModel):
    """One entry of a key's access list: a scope and one of its refs, or ``*`` for any
    (``tenant``/``institutional`` memory has the one ref ``-``)."""

    model_config = ConfigDict(extra="forbid")
    scope: Scope
    scope_ref: str = ScopeRef


class ApiKeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["admin", "agent", "compliance"]
    name: str = Field("", max_length=200, pattern=PLAIN_TEXT)
    scopes: list[ScopeGrant] | None = Field(
        None, max_length=100, description="Agent keys only: the scopes the key may see; "
        "leave out for a key that sees the whole tenant.")
    agent_id: str | None = Field(
        None, min_length=1, max_length=256, pattern=PLAIN_TEXT,
        description="Agent keys only: recorded as the agent of what the key writes and in "
        "its audit rows.")


class ScopeGrantOut(BaseModel):
    scope: str
    scope_ref: str


class CreatedApiKey(BaseModel):
    id: uuid.UUID
    role: str
    name: str
    scopes: list[ScopeGrantOut] | None = None
    agent_id: str | None = None
    api_key: str
