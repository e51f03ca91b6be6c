from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response

from ..deps import AdminCaller, AnyCaller, SessionDep
from . import service as tenants
from .schemas import (
    ApiKeyIn,
    ApiKeyList,
    ApiKeyOut,
    CreatedApiKey,
    CreatedTenant,
    ScopeGrantOut,
    TenantIn,
    TenantOut,
    WhoAmI,
)

router = APIRouter(tags=["tenants"])


@router.post("/v1/tenants", response_model=CreatedTenant, status_code=201)
def create_tenant(body: TenantIn, caller: AnyCaller, session: SessionDep) -> CreatedTenant:
    """Create a tenant and its first admin key (shown once). Needs the bootstrap admin key."""
    tenant, raw = tenants.create_tenant_as(session, caller, body.name)
    return CreatedTenant(tenant=TenantOut.model_validate(tenant), api_key=raw)


@router.post("/v1/api-keys", response_model=CreatedApiKey, status_code=201)
def create_api_key(body: ApiKeyIn, caller: AdminCaller, session: SessionDep) -> CreatedApiKey:
    """Create an API key for the caller's tenant: admin, agent (optionally limited to scopes),
    compliance, or user (a data subject's own key: `user_id` required). The secret is shown
    once."""
    key, raw = tenants.create_api_key(
        session, caller, body.role, body.name, agent_id=body.agent_id, user_id=body.user_id,
        scopes=None if body.scopes is None else [(g.scope.value, g.scope_ref)
                                                 for g in body.scopes])
    return CreatedApiKey(id=key.id, role=key.role, name=key.name, agent_id=key.agent_id,
                         user_id=key.user_id,
                         scopes=None if key.scopes is None
                         else [ScopeGrantOut(**g) for g in key.scopes], api_key=raw)


@router.get("/v1/api-keys", response_model=ApiKeyList)
def list_api_keys(caller: AdminCaller, session: SessionDep,
                  include_revoked: Annotated[bool, Query(
                      description="Also list revoked keys (with revoked_at).")] = False
                  ) -> ApiKeyList:
    """List the tenant's API keys: id, prefix, role, name, scopes, agent, when created and
    last used (to the hour). Never a secret: only a key's SHA-256 is stored."""
    keys = tenants.list_api_keys(session, caller, include_revoked=include_revoked)
    return ApiKeyList(items=[ApiKeyOut(
        id=k.id, prefix=k.prefix, role=k.role, name=k.name, agent_id=k.agent_id,
        scopes=None if k.scopes is None else [ScopeGrantOut(**g) for g in k.scopes],
        created_at=k.created_at, last_used_at=k.last_used_at, revoked_at=k.revoked_at)
        for k in keys])


@router.delete("/v1/api-keys/{key_id}", status_code=204)
def revoke_api_key(key_id: uuid.UUID, caller: AdminCaller, session: SessionDep) -> Response:
    """Revoke an API key of the caller's tenant; it stops working at once on this replica and
    within MEMPLANE_AUTH_CACHE_SECONDS on the others."""
    tenants.revoke_api_key(session, caller, key_id)
    return Response(status_code=204)


@router.get("/v1/whoami", response_model=WhoAmI)
def whoami(caller: AnyCaller, session: SessionDep) -> WhoAmI:
    """The calling key as the server knows it: its tenant, id and role (what a client, such as
    the compliance console at /console, shows or refuses before anything else). Any valid key;
    audited as `whoami`."""
    return tenants.whoami(session, caller)
