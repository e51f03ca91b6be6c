"""``client.summarizer`` against a live server, on SQLite and PostgreSQL, sync and async:
the tenant's summariser configured against a small real chat server
(tests/support/fake_llm.py), shown without its key, and removed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import memplane
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

KEY = "sk-sdk-" + "k3y" * 10


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def test_the_summarizer_config_round_trip(tenant: Tenant, fake_llm: FakeLLM) -> None:
    with tenant.client() as client:
        offline = client.summarizer.get_config()
        saved = client.summarizer.set_config(base_url=fake_llm.base_url, model="fake-model",
                                             api_key=KEY, timeout_seconds=5, max_retries=1,
                                             token_budget_per_run=5000)
        shown = client.summarizer.get_config()
        with pytest.raises(memplane.BadRequest) as refused:
            client.summarizer.set_config(base_url="ftp://llm.example", model="m")
        back = client.summarizer.delete_config()
    with tenant.stack.client(tenant.key("agent")) as agent, pytest.raises(memplane.Forbidden):
        agent.summarizer.set_config(base_url=fake_llm.base_url, model="fake-model")

    assert (offline.provider, offline.base_url, offline.has_api_key) \
        == ("extractive", None, False)
    assert (saved.provider, saved.base_url, saved.model, saved.has_api_key,
            saved.timeout_seconds, saved.max_retries, saved.token_budget_per_run) \
        == ("openai_compatible", fake_llm.base_url, "fake-model", True, 5.0, 1, 5000)
    assert KEY not in repr(saved) and KEY not in saved.model_dump_json()
    assert shown == saved
    assert refused.value.status_code == 422
    assert "base_url must be an http:// or https:// URL" in refused.value.detail
    assert back == offline
    assert [s.headers.get("Authorization") for s in fake_llm.seen] == [f"Bearer {KEY}"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_client_configures(tenant: Tenant, fake_llm: FakeLLM,
                                           anyio_backend: str) -> None:
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
        saved = await client.summarizer.set_config(base_url=fake_llm.base_url,
                                                   model="fake-model")
        shown = await client.summarizer.get_config()
        back = await client.summarizer.delete_config()

    assert (saved.provider, saved.has_api_key) == ("openai_compatible", False)
    assert shown == saved
    assert back.provider == "extractive"
