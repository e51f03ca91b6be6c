"""The SDK's named storage configurations (``client.storage.*_config*``) and agents
(``client.agents``) against a running server, sync and async, in the seed's shapes."""

from __future__ import annotations

import asyncio

import pytest

import memplane
from tests.storage_config.helpers import EuropeanGcsServer
from tests.support.buckets import S3Bucket
from tests.support.emulators import MotoServer, unique_name
from tests.support.service import Tenant


def test_the_seeds_calls_work_as_written(tenant: Tenant, moto_server: MotoServer,
                                         eu_gcs_server: EuropeanGcsServer) -> None:
    bucket = unique_name("gcs")
    eu_gcs_server.create_bucket(bucket)
    s3 = S3Bucket(moto_server)
    with tenant.client() as client:
        configured = client.storage.configure(
            {"type": "gcs", "region": "europe-west1", **eu_gcs_server.config(bucket)})
        assert (configured.storage_type, configured.region, configured.declared_region,
                configured.region_verified, configured.is_default) == (
            "gcs", "EUROPE-WEST1", "europe-west1", True, True)
        archive = client.storage.create_config(
            "archive", config={"type": "s3", **s3.connection_config})
        assert (archive.name, archive.is_default, archive.region) == (
            "archive", False, "us-east-1")
        assert archive.storage_config_id is not None
        sc = archive.storage_config_id
        assert [c.name for c in client.storage.list_configs()] == [None, "archive"]
        assert client.storage.get_config_by_id(sc).id == archive.id
        assert client.storage.rename_config(sc, "cold").name == "cold"

        agent = client.agents.update("support-bot", {"memory": {"userMemory": {
            "enabled": True, "retention": "90d", "storageConfigId": sc}}})
        assert (agent.memory.user_memory.retention_days,
                agent.memory.user_memory.storage_config_id) == (90, sc)
        assert client.agents.get("support-bot") == agent
        client.agents.update("sales-bot", name="Sales", user_memory_enabled=False)
        assert [a.agent_id for a in client.agents.iter(limit=1)] == ["sales-bot",
                                                                     "support-bot"]
        assert client.agents.get("sales-bot").memory.user_memory.enabled is False
        with pytest.raises(memplane.Conflict, match="send their user memories"):
            client.storage.delete_config(sc)
        client.agents.delete("support-bot")
        with pytest.raises(memplane.NotFound):
            client.agents.get("support-bot")
        assert client.storage.set_default_config(sc).is_default is True
        assert client.storage.get_config().id == archive.id
        with pytest.raises(memplane.BadRequest, match="not a storage config id"):
            client.storage.get_config_by_id("sc_abc123")


def test_the_async_client_has_the_same_calls(tenant: Tenant) -> None:
    async def run() -> list[str | None]:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            await client.agents.update("async-bot", retention="30d")
            page = await client.agents.list()
            configs = await client.storage.list_configs()
            return [a.memory.user_memory.retention for a in page.items] + [
                c.storage_type for c in configs]

    assert asyncio.run(run()) == ["30d", "default"]
