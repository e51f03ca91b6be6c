"""The SDK's ``client.dlp`` (sync and async) against the live service, and a refused write
raised as ``memplane.SensitiveData``."""

from __future__ import annotations

import asyncio

import pytest

import memplane
from tests.dlp.helpers import CARD, SSN
from tests.support.service import Tenant


def test_get_and_set_the_policy_and_catch_a_refusal(tenant: Tenant) -> None:
    with tenant.client() as client:
        first = client.dlp.get_policy()
        assert (first.mode, first.is_default, first.extracted_mode, first.updated_at) == (
            "flag", True, "refuse", None)
        assert first.kinds == ["card", "ssn", "iban", "private_key", "cloud_key",
                               "bearer_token", "password"]
        set_ = client.dlp.set_policy(mode="refuse", kinds=["ssn", "card"])
        assert (set_.mode, set_.kinds, set_.is_default) == ("refuse", ["card", "ssn"], False)
        assert client.dlp.get_policy() == set_
        with pytest.raises(memplane.SensitiveData) as refused:
            client.memory.set(scope="user", scope_ref="u-1", key="card", value=f"c {CARD}")
        assert isinstance(refused.value, memplane.BadRequest)
        assert refused.value.status_code == 422 and refused.value.kinds == ["card"]
        assert CARD not in str(refused.value)
        with pytest.raises(memplane.BadRequest) as bad:
            client.dlp.set_policy(mode="refuse", kinds=["passport"])
        assert not isinstance(bad.value, memplane.SensitiveData)
        assert "the kinds are card, ssn" in str(bad.value)
        with pytest.raises(TypeError):
            client.dlp.set_policy(mode="refuse", kinds="card")


def test_the_async_client_and_an_agent_key(tenant: Tenant) -> None:
    agent_key = tenant.key("agent")

    async def run() -> None:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            policy = await client.dlp.set_policy(mode="redact")
            assert (policy.mode, policy.is_default) == ("redact", False)
            await client.memory.set(scope="user", scope_ref="u-2", key="id", value=f"ssn {SSN}")
            got = await client.memory.get(scope="user", scope_ref="u-2", key="id")
            assert got.value == "ssn [redacted:ssn]"
        async with memplane.AsyncClient(tenant.stack.base_url, agent_key) as agent:
            with pytest.raises(memplane.Forbidden):
                await agent.dlp.get_policy()
            with pytest.raises(memplane.Forbidden):
                await agent.dlp.set_policy(mode="off")

    asyncio.run(run())
