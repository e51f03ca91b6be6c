"""The seed's storage and agent calls as written, against a running server (SQLite and
PostgreSQL): ``client.storage.configure(storage_type=…, connection_config=…)``, the storage
routes taking the seed's camelCase body as well as the documented snake_case one, and
``client.agents.update(agent_id=…, memory={'userMemory': {…}})``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import memplane
from tests.support.emulators import FakeGcsServer, unique_name
from tests.support.service import Tenant


def _camel(config: dict[str, Any]) -> dict[str, Any]:
    """The emulator's GCS settings as the seed spells them (``useBatch``)."""
    return {("useBatch" if k == "use_batch" else k): v for k, v in config.items()}


def _call(tenant: Tenant, method: str, path: str, body: dict[str, Any]) -> Any:
    with tenant.stack.http(tenant.admin_key) as http:
        return http.request(method, path, json=body)


def test_storage_configure_as_the_seed_writes_it(tenant: Tenant,
                                                 gcs_config: dict[str, Any]) -> None:
    with tenant.client() as client:
        configured = client.storage.configure(storage_type='gcs', connection_config=gcs_config)
        assert (configured.storage_type, configured.bucket, configured.is_default) == (
            "gcs", gcs_config["bucket"], True)
        assert configured.connection_config == gcs_config
        assert client.storage.get_config().id == configured.id
        again = client.storage.configure({"storageType": "gcs",
                                          "connectionConfig": _camel(gcs_config)})
        assert (again.storage_type, again.connection_config) == ("gcs", gcs_config)
        with pytest.raises(ValueError, match="needs one 'type'"):
            client.storage.configure({"type": "gcs", "storageType": "gcs", **gcs_config})


@pytest.mark.parametrize("spelling", ["camelCase", "snake_case"])
def test_both_storage_routes_take_either_spelling(tenant: Tenant, gcs_server: FakeGcsServer,
                                                  spelling: str) -> None:
    bucket = unique_name("seed")
    gcs_server.create_bucket(bucket)
    config = gcs_server.config(bucket)
    if spelling == "camelCase":
        body = {"storageType": "gcs", "connectionConfig": _camel(config)}
        named = {**body, "name": "seed", "makeDefault": False}
    else:
        body = {"storage_type": "gcs", "connection_config": config}
        named = {**body, "name": "seed", "make_default": False}
    put = _call(tenant, "PUT", "/v1/storage/config", body)
    assert put.status_code == 200, put.text
    assert (put.json()["storage_type"], put.json()["connection_config"]) == ("gcs", config)
    created = _call(tenant, "POST", "/v1/storage/configs", named)
    assert created.status_code == 201, created.text
    assert (created.json()["name"], created.json()["is_default"],
            created.json()["connection_config"]) == ("seed", False, config)


@pytest.mark.parametrize(("path", "extra", "expected"), [
    ("/v1/storage/config", {"storageTyp": "x"},
     "body.gcs.storageTyp: Extra inputs are not permitted"),
    ("/v1/storage/configs", {"name": "x", "makeDefualt": True},
     "body.gcs.makeDefualt: Extra inputs are not permitted"),
    ("/v1/storage/config", {"connectionConfig": {"bucketRegion": "eu"}},
     "body.gcs.connection_config: Value error, gcs connection_config does not accept "
     "'bucketRegion'"),
    ("/v1/storage/config", {"storage_type": "gcs"},
     "body: Value error, give storage_type or storageType, not both"),
    ("/v1/storage/config", {"connectionConfig": {"use_batch": False, "useBatch": False}},
     "body.gcs.connection_config: Value error, give use_batch or useBatch, not both"),
], ids=["unknown-top-key", "unknown-named-key", "unknown-inner-key", "both-type-spellings",
        "both-inner-spellings"])
def test_an_unknown_or_doubled_camel_case_key_is_a_422_naming_it(
        tenant: Tenant, gcs_server: FakeGcsServer, path: str, extra: dict[str, Any],
        expected: str) -> None:
    config = _camel(gcs_server.config("never-created"))
    extra = dict(extra)  # the parameters are shared by both databases' runs
    inner = extra.pop("connectionConfig", {})
    body = {"storageType": "gcs", "connectionConfig": {**config, **inner}, **extra}
    answer = _call(tenant, "PUT" if path.endswith("config") else "POST", path, body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "validation_error"
    assert answer.json()["detail"].startswith(expected)
    with tenant.client() as client:
        assert [c.storage_type for c in client.storage.list_configs()] == ["default"]


def test_agents_update_as_the_seed_writes_it(tenant: Tenant,
                                             gcs_config: dict[str, Any]) -> None:
    with tenant.client() as client:
        sc = client.storage.create_config("eu", 'gcs', gcs_config).storage_config_id
        assert sc is not None
        agent = client.agents.update(agent_id='agent-123', memory={'userMemory': {
            'enabled': True, 'retention': '90d', 'storageConfigId': sc}})
        assert (agent.agent_id, agent.memory.user_memory.enabled,
                agent.memory.user_memory.retention_days,
                agent.memory.user_memory.storage_config_id) == ("agent-123", True, 90, sc)
        off = client.agents.update(agent_id='agent-123', name='Support',
                                   memory={'user_memory': {'enabled': False}})
        assert (off.name, off.memory.user_memory.enabled,
                off.memory.user_memory.storage_config_id) == ("Support", False, None)
        with pytest.raises(ValueError, match="give memory=.* alone"):
            client.agents.update(agent_id='agent-123', retention='30d',
                                 memory={'userMemory': {'enabled': True}})
        with pytest.raises(memplane.BadRequest, match="colour"):
            client.agents.update(agent_id='agent-123', memory={'userMemory': {'colour': 1}})
        assert client.agents.get('agent-123') == off


def test_the_async_client_takes_the_same_calls(tenant: Tenant,
                                               gcs_config: dict[str, Any]) -> None:
    async def run() -> list[object]:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            configured = await client.storage.configure(storage_type='gcs',
                                                        connection_config=gcs_config)
            agent = await client.agents.update(agent_id='agent-123', memory={
                'userMemory': {'retention': '30d'}})
            return [configured.storage_type, agent.memory.user_memory.retention_days]

    assert asyncio.run(run()) == ["gcs", 30]
