"""The request builder and response parser that the sync and async clients share.

Each endpoint is a function returning a ``Call``: what to send and how to read the answer.
The two clients differ only in how they send a ``Call``, so every URL, header, body and
error mapping is written once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from ._exceptions import InvalidResponse, error_from_response
from ._models import (
    ApiKey,
    ApiKeyList,
    AuditEntry,
    AuditVerification,
    CreatedKey,
    CreatedTenant,
    Memory,
    Page,
    Pointer,
    StorageConfig,
    StorageHealth,
)
from ._version import __version__

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

USER_AGENT = f"memplane-python/{__version__}"

# Scopes with a single instance per tenant; their scope_ref is the placeholder "-".
_SINGLETON_SCOPES = frozenset({"tenant", "institutional"})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP exchange: the request to send and the parser for a success answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, str] = field(default_factory=dict)
    json: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raise_for_status: bool = True


class ClientConfig:
    """Base URL and default headers; builds ``httpx.Request`` objects for either client."""

    def __init__(self, base_url: str, api_key: str) -> None:
        if not base_url:
            raise ValueError("base_url must be a non-empty URL")
        if not api_key:
            raise ValueError("api_key must be a non-empty string")
        self.base_url = base_url.rstrip("/")
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": USER_AGENT,
            "Accept": "application/json",
        }

    def build_request(
        self, http: httpx.Client | httpx.AsyncClient, call: Call[Any]
    ) -> httpx.Request:
        return http.build_request(
            call.method,
            self.base_url + call.path,
            params=call.params or None,
            json=call.json,
            headers={**self.headers, **call.headers},
        )


def handle_response(call: Call[T], response: httpx.Response) -> T:
    """Raise the mapped ``APIError`` for an error status, else parse the answer."""
    if call.raise_for_status and response.is_error:
        raise error_from_response(response)
    return call.parse(response)


# -- path and parameter encoding ------------------------------------------------------------


def path_segment(value: str, *, name: str) -> str:
    """Encode ``value`` as exactly one path segment.

    Everything outside the unreserved set is percent-encoded, ``/`` included, and a bare
    ``.`` or ``..`` is encoded too, because URL normalisation would otherwise remove it.
    Whether such a key is acceptable is the server's decision, not the SDK's.
    """
    if not value:
        raise ValueError(f"{name} must be a non-empty string")
    if value in {".", ".."}:
        return value.replace(".", "%2E")
    return quote(value, safe="")


def _scope_path(scope: str, scope_ref: str | None) -> str:
    if scope_ref is None:
        if scope not in _SINGLETON_SCOPES:
            raise ValueError(f"scope_ref is required for scope {scope!r}")
        scope_ref = "-"
    return (
        f"/v1/memories/{path_segment(scope, name='scope')}"
        f"/{path_segment(scope_ref, name='scope_ref')}"
    )


# The seed names a scope's instance by its owner: user_id for scope user, and so on.
_SCOPE_OWNERS = {"user": "user_id", "agent": "agent_id", "team": "team_id"}


def seed_scope(scope: str | None, scope_ref: str | None, *, user_id: str | None = None,
               agent_id: str | None = None, team_id: str | None = None) -> tuple[str, str | None]:
    """``(scope, scope_ref)`` from the seed's spelling: the scope_ref of scope ``user`` is
    ``user_id``, of ``agent`` ``agent_id``, of ``team`` ``team_id``; ``team_id`` without a
    scope means scope ``team``. A scope_ref that contradicts them raises ``ValueError``."""
    if scope is None:
        if team_id is None:
            raise ValueError("give scope ('user', 'agent', 'team', 'tenant', …), or team_id "
                             "for a team's memory")
        scope = "team"
    if team_id is not None and scope != "team":
        raise ValueError(f"team_id names a team's memory: give scope='team' (or no scope) "
                         f"with it, not scope={scope!r}")
    owner = _SCOPE_OWNERS.get(scope)
    named = {"user_id": user_id, "agent_id": agent_id, "team_id": team_id}.get(owner or "")
    if owner is None or named is None:
        return scope, scope_ref
    if scope_ref is not None and scope_ref != named:
        raise ValueError(f"scope_ref={scope_ref!r} contradicts {owner}={named!r}: the "
                         f"scope_ref of scope {scope!r} is the {owner}; give one of them, or "
                         f"the same value in both")
    return scope, named


def seed_filter(scope: str | None, scope_ref: str | None, *, user_id: str | None,
                agent_id: str | None, team_id: str | None) -> tuple[str | None, str | None]:
    """A listing's ``(scope, scope_ref)`` as ``seed_scope`` reads them. ``user_id`` stays
    what it always was in a listing, the filter by data subject: it names the scope_ref of
    scope ``user`` only when no scope_ref is given (with one, both filters apply)."""
    if scope is None and team_id is None and agent_id is None:
        return None, scope_ref
    subject = user_id if scope_ref is None else None
    scope, scope_ref = seed_scope(scope, scope_ref, user_id=subject, agent_id=agent_id,
                                  team_id=team_id)
    if agent_id is not None and scope != "agent":
        raise ValueError("pointers are not filtered by agent_id: give scope='agent' with it "
                         "to list that agent's memories")
    return scope, scope_ref


def _key_path(scope: str, scope_ref: str | None, key: str) -> str:
    return f"{_scope_path(scope, scope_ref)}/{path_segment(key, name='key')}"


def query_params(**values: Any) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            params[name] = value.isoformat()
        else:
            params[name] = str(value)
    return params


def _without_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


def _idempotency(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Idempotency-Key": key}


# -- response parsers -----------------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise InvalidResponse(
            f"{response.request.method} {response.request.url.path}: expected JSON, "
            f"got {response.headers.get('content-type', 'no content type')}"
        ) from exc


def parse_model(model: type[M]) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        try:
            return model.model_validate(_json(response))
        except ValidationError as exc:
            raise InvalidResponse(
                f"{response.request.method} {response.request.url.path}: "
                f"answer does not match {model.__name__}: {exc}"
            ) from exc

    return parse


def parse_nothing(response: httpx.Response) -> None:
    return None


def parse_deleted_count(response: httpx.Response) -> int:
    data = _json(response)
    count = data.get("deleted") if isinstance(data, dict) else None
    if not isinstance(count, int) or isinstance(count, bool):
        raise InvalidResponse(f"expected {{'deleted': <int>}}, got {data!r}")
    return count


def parse_success(response: httpx.Response) -> bool:
    return response.is_success


# -- endpoints ------------------------------------------------------------------------------


def memory_set(
    *,
    scope: str,
    scope_ref: str | None,
    key: str,
    value: Any,
    metadata: Mapping[str, Any],
    idempotency_key: str | None,
) -> Call[Pointer]:
    return Call(
        "PUT",
        _key_path(scope, scope_ref, key),
        parse_model(Pointer),
        json={"value": value, **_without_none(metadata)},
        headers=_idempotency(idempotency_key),
    )


def memory_get(*, scope: str, scope_ref: str | None, key: str) -> Call[Memory]:
    return Call("GET", _key_path(scope, scope_ref, key), parse_model(Memory))


def memory_append(
    *,
    scope: str,
    scope_ref: str | None,
    key: str,
    value: Any,
    metadata: Mapping[str, Any],
    idempotency_key: str | None,
) -> Call[Pointer]:
    return Call(
        "POST",
        _key_path(scope, scope_ref, key) + "/append",
        parse_model(Pointer),
        json={"value": value, **_without_none(metadata)},
        headers=_idempotency(idempotency_key),
    )


def memory_delete(*, scope: str, scope_ref: str | None, key: str) -> Call[None]:
    return Call("DELETE", _key_path(scope, scope_ref, key), parse_nothing)


def memory_clear(*, scope: str, scope_ref: str | None) -> Call[int]:
    return Call("DELETE", _scope_path(scope, scope_ref), parse_deleted_count)


def list_pointers(
    *,
    scope: str | None,
    scope_ref: str | None,
    user_id: str | None,
    memory_type: str | None,
    sync_status: str | None,
    limit: int | None,
    cursor: str | None,
    tag: str | None = None,
    key_prefix: str | None = None,
    order: str | None = None,
) -> Call[Page[Pointer]]:
    params = query_params(
        scope=scope,
        scope_ref=scope_ref,
        user_id=user_id,
        memory_type=memory_type,
        sync_status=sync_status,
        limit=limit,
        cursor=cursor,
        tag=tag,
        key_prefix=key_prefix,
        order=order,
    )
    return Call("GET", "/v1/pointers", parse_model(Page[Pointer]), params=params)


def list_memories(**filters: Any) -> Call[Page[Memory]]:
    """``list_pointers``'s page with each memory's verified value (``include_values``)."""
    call = list_pointers(**filters)
    return Call("GET", "/v1/pointers", parse_model(Page[Memory]),
                params={**call.params, "include_values": "true"})


def audit_list(
    *,
    pointer_id: str | None,
    accessor_id: str | None,
    operation: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    cursor: str | None,
) -> Call[Page[AuditEntry]]:
    params = query_params(
        pointer_id=pointer_id,
        accessor_id=accessor_id,
        operation=operation,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "/v1/audit", parse_model(Page[AuditEntry]), params=params)


def audit_verify() -> Call[AuditVerification]:
    return Call("GET", "/v1/audit/verify", parse_model(AuditVerification))


ScopeGrant = tuple[str, str] | Mapping[str, str]


def _grant(grant: ScopeGrant) -> dict[str, str]:
    if isinstance(grant, Mapping):
        return {"scope": grant["scope"], "scope_ref": grant["scope_ref"]}
    scope, scope_ref = grant
    return {"scope": scope, "scope_ref": scope_ref}


def keys_create(*, role: str, name: str, idempotency_key: str | None,
                scopes: Sequence[ScopeGrant] | None = None,
                agent_id: str | None = None,
                user_id: str | None = None) -> Call[CreatedKey]:
    body: dict[str, Any] = {"role": role, "name": name}
    if user_id is not None:
        body["user_id"] = user_id
    if scopes is not None:
        body["scopes"] = [_grant(g) for g in scopes]
    if agent_id is not None:
        body["agent_id"] = agent_id
    return Call(
        "POST",
        "/v1/api-keys",
        parse_model(CreatedKey),
        json=body,
        headers=_idempotency(idempotency_key),
    )


def keys_list(*, include_revoked: bool = False) -> Call[list[ApiKey]]:
    parse = parse_model(ApiKeyList)
    return Call("GET", "/v1/api-keys", lambda response: parse(response).items,
                params={"include_revoked": "true"} if include_revoked else {})


def keys_delete(key_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/api-keys/{path_segment(key_id, name='key_id')}", parse_nothing)


def tenants_create(*, name: str, idempotency_key: str | None) -> Call[CreatedTenant]:
    return Call(
        "POST",
        "/v1/tenants",
        parse_model(CreatedTenant),
        json={"name": name},
        headers=_idempotency(idempotency_key),
    )


def storage_configure(
    *, storage_type: str, connection_config: Mapping[str, Any], idempotency_key: str | None
) -> Call[StorageConfig]:
    return Call(
        "PUT",
        "/v1/storage/config",
        parse_model(StorageConfig),
        json={"storage_type": storage_type, "connection_config": dict(connection_config)},
        headers=_idempotency(idempotency_key),
    )


def storage_get_config() -> Call[StorageConfig]:
    return Call("GET", "/v1/storage/config", parse_model(StorageConfig))


def storage_health() -> Call[StorageHealth]:
    return Call("GET", "/v1/storage/health", parse_model(StorageHealth))


def probe(path: str) -> Call[bool]:
    """A health probe: an error status reads as ``False`` instead of raising."""
    return Call("GET", path, parse_success, raise_for_status=False)
