"""``client.memory.search`` (sync and async) and ``memplane search`` against a live server."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import memplane
from memplane.cli import app
from tests.search.test_search_api import FACTS, _index
from tests.support.service import Tenant


def _fill(tenant: Tenant) -> None:
    with tenant.client() as client:
        for key, value in FACTS.items():
            client.memory.set(scope="user", scope_ref="u-sdk", key=key, value=value,
                              tags=["profile"])
        client.memory.set(scope="agent", scope_ref="bot", key="dog",
                          value={"content": "Dogs need walks twice a day."})
    _index(tenant)


def test_sync_client_searches_with_filters(tenant: Tenant) -> None:
    _fill(tenant)
    with tenant.client() as client:
        found = client.memory.search("dog thunderstorms", scope="user", scope_ref="u-sdk",
                                     limit=1)
        everywhere = client.memory.search("dog walks", tags=["profile"], limit=10,
                                          include_values=False)
        pointer = client.memory.get(scope="user", scope_ref="u-sdk", key="pet").pointer

    assert isinstance(found, memplane.SearchResults)
    assert [(r.kind, r.key, r.value) for r in found.results] == [
        ("memory", "pet", FACTS["pet"])]
    assert found.embedder == "memplane-hash-v2"
    assert {r.scope_ref for r in everywhere.results} == {"u-sdk"}
    assert all(r.value is None for r in everywhere.results)
    assert pointer.has_embeddings is True
    assert pointer.embedding_storage_path == f"{pointer.storage_path}.vec"


@pytest.mark.anyio
async def test_async_client_searches(tenant: Tenant) -> None:
    _fill(tenant)
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
        found = await client.memory.search("walks twice a day", scope="agent",
                                           scope_ref="bot", limit=1)
    assert [(r.key, r.value) for r in found.results] == [
        ("dog", {"content": "Dogs need walks twice a day."})]


def test_cli_search_prints_results(tenant: Tenant) -> None:
    _fill(tenant)
    agent = tenant.key("agent")
    env = {"MEMPLANE_URL": tenant.stack.base_url, "MEMPLANE_API_KEY": agent}
    runner = CliRunner()
    as_json = runner.invoke(app, ["search", "peanuts curry", "--scope", "user",
                                  "--scope-ref", "u-sdk", "--limit", "1", "--json"], env=env)
    table = runner.invoke(app, ["search", "peanuts curry", "--limit", "2"], env=env)
    bad = runner.invoke(app, ["search", "dog", "--scope-ref", "u-sdk"], env=env)

    assert as_json.exit_code == 0, as_json.output
    (line,) = as_json.output.splitlines()
    assert (json.loads(line)["key"], json.loads(line)["value"]) == ("food", FACTS["food"])
    assert table.exit_code == 0, table.output
    assert "2 results (memplane-hash-v2" in table.output and "peanuts" in table.output
    assert bad.exit_code == 1 and "scope_ref needs scope" in bad.output
