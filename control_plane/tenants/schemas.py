from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..addresses import Scope
from ..kit import PLAIN_TEXT

ScopeRef = Field(min_length=1, max_length=256, pattern=PLAIN_TEXT)


class TenantIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "acme"}]})
    name: str = Field(min_length=1, max_length=200, pattern=PLAIN_TEXT,
                      description="A name for the tenant (plain text).")


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: uuid.UUID = Field(description="The tenant's id.")
    name: str = Field(description="Its name.")


class CreatedTenant(BaseModel):
    tenant: TenantOut = Field(description="The new tenant.")
    api_key: str = Field(description="The new tenant's admin key, shown once; store it.")


class ScopeGrant(BaseModel):
    """One entry of a key's access list: a scope and one of its refs, or ``*`` for any
    (``tenant``/``institutional`` memory has the one ref ``-``)."""

    model_config = ConfigDict(extra="forbid")
    scope: Scope = Field(description="A memory scope.")
    scope_ref: str = Field(min_length=1, max_length=256, pattern=PLAIN_TEXT,
                           description="One ref of that scope, or '*' for every ref.")


class ApiKeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"role": "agent", "name": "support bot", "agent_id": "support-bot",
         "scopes": [{"scope": "user", "scope_ref": "*"}]},
        {"role": "compliance", "name": "DPO"},
        {"role": "user", "name": "end user u-123", "user_id": "u-123"}]})
    role: Literal["admin", "agent", "compliance", "user"] = Field(
        description="admin: everything; agent: read and write memories; compliance: audit, "
        "exports and erasures; user: a data subject's own key, which reads, writes, searches "
        "and exports only that subject's memories (never erases them).")
    name: str = Field("", max_length=200, pattern=PLAIN_TEXT,
                      description="A label to recognise the key by.")
    scopes: list[ScopeGrant] | None = Field(
        None, max_length=100, description="Agent keys only: the scopes the key may see; "
        "leave out for a key that sees the whole tenant.")
    agent_id: str | None = Field(
        None, min_length=1, max_length=256, pattern=PLAIN_TEXT,
        description="Agent keys only: recorded as the agent of what the key writes and in "
        "its audit rows.")
    user_id: str | None = Field(
        None, min_length=1, max_length=256, pattern=PLAIN_TEXT,
        description="User keys only, and required for them: the data subject the key "
        "belongs to (its user scope, and every memory whose user_id is this).")


class ScopeGrantOut(BaseModel):
    scope: str = Field(description="A memory scope.")
    scope_ref: str = Field(description="One ref of that scope, or '*' for every ref.")


class CreatedApiKey(BaseModel):
    id: uuid.UUID = Field(description="The key's id (to revoke it with DELETE "
                          "/v1/api-keys/{id}).")
    role: str = Field(description="admin, agent, compliance or user.")
    name: str = Field(description="Its label.")
    scopes: list[ScopeGrantOut] | None = Field(None, description="The scopes an agent key "
                                               "may see; null: the whole tenant.")
    agent_id: str | None = Field(None, description="The agent an agent key acts as.")
    user_id: str | None = Field(None, description="The data subject a user key belongs to.")
    api_key: str = Field(description="The secret, shown once; store it.")


class WhoAmI(BaseModel):
    """GET /v1/whoami: the calling key, never its secret."""

    tenant_id: uuid.UUID = Field(description="The key's tenant.")
    key_id: uuid.UUID = Field(description="The key's id (audit rows name it as key:<id>).")
    role: str = Field(description="admin, agent, compliance or user.")
    agent_id: str | None = Field(description="The agent an agent key acts as.")
    user_id: str | None = Field(description="The data subject a user key belongs to.")
    scoped: bool = Field(description="True when the key sees only some scopes (or one "
                         "subject), not the whole tenant.")
    can_create_tenants: bool = Field(description="True for the bootstrap admin key.")


class ApiKeyOut(BaseModel):
    """An API key as the admin's list shows it: never its secret (which is not stored)."""

    id: uuid.UUID = Field(description="The key's id (DELETE /v1/api-keys/{id} revokes it).")
    prefix: str = Field(description="The secret's first characters, to recognise it by.")
    role: str = Field(description="admin, agent, compliance or user.")
    name: str = Field(description="Its label.")
    scopes: list[ScopeGrantOut] | None = Field(None, description="The scopes an agent key "
                                               "may see; null: the whole tenant.")
    agent_id: str | None = Field(None, description="The agent an agent key acts as.")
    created_at: datetime = Field(description="When it was created.")
    last_used_at: datetime | None = Field(None, description="When it was last accepted, to "
                                          "the hour; null: never used.")
    revoked_at: datetime | None = Field(None, description="When it was revoked (only with "
                                        "include_revoked=true); null: it works.")


class ApiKeyList(BaseModel):
    items: list[ApiKeyOut] = Field(description="The tenant's keys, oldest first.")
