"""The SDK's model routing (``client.model_routes``), ``client.compactor.resummarize`` and
importance as a retention priority, against the live service on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update

import memplane
from control_plane.db.base import utcnow
from control_plane.db.models import MemoryPointer
from memplane import NotFound
from tests.compactor.test_api_run import BODIES, _post_events, _run
from tests.support.fake_llm import FakeLLM
from tests.support.service import Tenant

KEY = "sk-sdk-route-" + "k" * 30


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def test_model_routes_round_trip_without_keys(tenant: Tenant, fake_llm: FakeLLM) -> None:
    with tenant.client() as client:
        assert client.model_routes.get().rules == []
        saved = client.model_routes.set(rules=[
            {"purpose": "compaction", "scope": "entity", "base_url": fake_llm.base_url,
             "model": "entity-model", "api_key": KEY, "token_budget_per_run": 9000},
            {"purpose": "extraction", "base_url": fake_llm.base_url, "model": "x-model"}])
        assert [(r.purpose, r.scope, r.model, r.has_api_key, r.token_budget_per_run)
                for r in saved.rules] == [("compaction", "entity", "entity-model", True, 9000),
                                          ("extraction", None, "x-model", False, None)]
        assert saved.fallback.provider == "extractive"
        assert KEY not in repr(client.model_routes.get())

    async def read() -> list[str]:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            return [r.model for r in (await client.model_routes.get()).rules]

    assert asyncio.run(read()) == ["entity-model", "x-model"]
    with tenant.client() as client:
        assert client.model_routes.set(rules=[]).rules == []


def test_resummarize_and_importance_through_the_sdk(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _post_events(http, "entity", "ent_acme", BODIES, days_ago=200)
        _run(http)
    with tenant.client() as client:
        [entry] = client.entries.list(scope="entity", scope_ref="ent_acme").items
        again = client.compactor.resummarize(entry.id)
        assert (again.entry_id, again.version, again.event_count, again.model,
                again.previous_model, again.decisions_kept) == (
            entry.id, 2, 4, "extractive-v1", "extractive-v1", 0)
        with pytest.raises(NotFound):
            client.compactor.resummarize("00000000-0000-7000-8000-000000000000")
        policy = client.retention.set_policy(scope="user", retention_days=30,
                                             auto_delete=True, keep_importance_at_least=4)
        assert policy.keep_importance_at_least == 4
    with tenant.stack.http(tenant.admin_key) as http:
        for key, importance in (("incident", 5), ("chatter", 2)):
            assert http.put(f"/v1/memories/agent/bot/{key}", json={
                "value": key, "importance": importance}).status_code in (200, 201)
    with tenant.stack.runtime.sessions() as session:
        session.execute(update(MemoryPointer).where(MemoryPointer.tenant_id == tenant.id,
                                                    MemoryPointer.scope_ref == "bot")
                        .values(updated_at=utcnow() - timedelta(days=10)))
        session.commit()
    with tenant.client() as client:
        result = client.memory.cleanup(older_than_days=5, dry_run=True,
                                       keep_importance_at_least=5)
        assert not isinstance(result, memplane.Job)
        assert (result.matched, result.important, [i.key for i in result.items or []]) == (
            1, 1, ["chatter"])
