"""Request builders and models for named storage configurations and agents.

Like ``_layer_calls.py`` they only describe an exchange (a ``Call``); the sync and async
clients send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._base import (
    Call,
    _idempotency,
    _without_none,
    parse_model,
    parse_nothing,
    path_segment,
    query_params,
)
from ._models import Page, StorageConfig, _Model


class UserMemorySettings(_Model):
    """An agent's user-memory settings."""

    enabled: bool = True
    retention: str | None = None
    retention_days: int | None = None
    storage_config_id: str | None = None


class AgentMemorySettings(_Model):
    user_memory: UserMemorySettings


class Agent(_Model):
    """An agent as a resource: its name and memory settings."""

    agent_id: str
    name: str | None = None
    memory: AgentMemorySettings
    created_at: datetime
    updated_at: datetime


def seed_storage_config(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The seed's flat shape ``{"type": "gcs", "bucket": ..., "region": ...}``, or its body
    ``{"storageType": "gcs", "connectionConfig": {...}}``, as (storage_type,
    connection_config)."""
    fields = dict(config)
    types = [fields.pop(n) for n in ("type", "storage_type", "storageType") if n in fields]
    if len(types) != 1 or not isinstance(types[0], str):
        raise ValueError("the storage configuration needs one 'type' (or storageType): s3, "
                         "gcs, azure or local")
    storage_type = types[0]
    nests = [fields.pop(n) for n in ("connection_config", "connectionConfig") if n in fields]
    if len(nests) > 1:
        raise ValueError("give connection_config or connectionConfig, not both")
    nested = nests[0] if nests else None
    return storage_type, {**(dict(nested) if nested else {}), **fields}


def _config_id(value: str) -> str:
    return path_segment(str(value), name="storage_config_id")


def config_create(*, name: str, storage_type: str, connection_config: Mapping[str, Any],
                  make_default: bool, idempotency_key: str | None) -> Call[StorageConfig]:
    return Call("POST", "/v1/storage/configs", parse_model(StorageConfig),
                json={"name": name, "storage_type": storage_type,
                      "connection_config": dict(connection_config),
                      "make_default": make_default},
                headers=_idempotency(idempotency_key))


def config_list() -> Call[Page[StorageConfig]]:
    return Call("GET", "/v1/storage/configs", parse_model(Page[StorageConfig]))


def config_get(storage_config_id: str) -> Call[StorageConfig]:
    return Call("GET", f"/v1/storage/configs/{_config_id(storage_config_id)}",
                parse_model(StorageConfig))


def config_rename(storage_config_id: str, name: str) -> Call[StorageConfig]:
    return Call("PUT", f"/v1/storage/configs/{_config_id(storage_config_id)}",
                parse_model(StorageConfig), json={"name": name})


def config_make_default(storage_config_id: str) -> Call[StorageConfig]:
    return Call("POST", f"/v1/storage/configs/{_config_id(storage_config_id)}/default",
                parse_model(StorageConfig))


def config_delete(storage_config_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/storage/configs/{_config_id(storage_config_id)}",
                parse_nothing)


def _agent_id(value: str) -> str:
    return path_segment(str(value), name="agent_id")


def agent_update(agent_id: str, settings: Mapping[str, Any] | None, *, name: str | None,
                 user_memory_enabled: bool | None, retention: str | None,
                 storage_config_id: str | None,
                 memory: Mapping[str, Any] | None = None) -> Call[Agent]:
    if memory is not None:  # the seed's update(agent_id=…, memory={'userMemory': {…}})
        if settings is not None or any(v is not None for v in (
                user_memory_enabled, retention, storage_config_id)):
            raise ValueError("give memory={'userMemory': {...}} alone, not with settings or "
                             "user_memory_enabled / retention / storage_config_id")
        body = _without_none({"name": name, "memory": dict(memory)})
    elif settings is not None:
        body = dict(settings)  # the seed's shape, camelCase or snake_case, as given
    else:
        user_memory = _without_none({"enabled": user_memory_enabled, "retention": retention,
                                     "storage_config_id": storage_config_id})
        body = _without_none({"name": name, "memory": {"user_memory": user_memory}})
    return Call("PUT", f"/v1/agents/{_agent_id(agent_id)}", parse_model(Agent), json=body)


def agent_get(agent_id: str) -> Call[Agent]:
    return Call("GET", f"/v1/agents/{_agent_id(agent_id)}", parse_model(Agent))


def agent_list(*, limit: int | None, cursor: str | None) -> Call[Page[Agent]]:
    return Call("GET", "/v1/agents", parse_model(Page[Agent]),
                params=query_params(limit=limit, cursor=cursor))


def agent_delete(agent_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/agents/{_agent_id(agent_id)}", parse_nothing)
