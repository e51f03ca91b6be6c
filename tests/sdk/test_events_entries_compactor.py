"""``client.compactor`` against a live server and its job worker, on SQLite and PostgreSQL,
sync and async: old events in through the SDK, a run by hand, the entry and its provenance
out, the tenant's thresholds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import memplane
from tests.support.service import Tenant

BODIES = ["We agreed to raise the ROAS target to 4 for Q3.",
          "Maria decided to move 20% of the budget to Meta.",
          "Acme will renew for $120k if the pilot hits 3.5 ROAS."]


def test_a_run_by_hand_through_the_sdk(tenant: Tenant) -> None:
    long_ago = datetime.now(UTC) - timedelta(days=120)
    with tenant.client() as client:
        events = [client.events.append("entity", "ent_acme", "call_summary", body,
                                       occurred_at=long_ago + timedelta(hours=n))
                  for n, body in enumerate(BODIES)]
        dry = client.jobs.wait(client.compactor.run(dry_run=True).id, timeout=60)
        assert len(client.events.list(scope="entity", scope_ref="ent_acme").items) == 3
        job = client.jobs.wait(client.compactor.run(scope="entity").id, timeout=60)
        default = client.events.list(scope="entity", scope_ref="ent_acme")
        compressed = client.events.list(scope="entity", scope_ref="ent_acme",
                                        include_compressed=True)
        [entry] = client.entries.list(scope="entity", scope_ref="ent_acme",
                                      include_summary=True).items
        trace = client.compactor.provenance(entry.id)
        thresholds = client.compactor.set_config(min_events=5, older_than_days=30)
        read_back = client.compactor.get_config()
    with tenant.stack.client(tenant.key("agent")) as agent, pytest.raises(memplane.Forbidden):
        agent.compactor.run()

    assert (dry.state, dry.kind) == ("completed", "compact")
    assert dry.result is not None
    assert (dry.result["dry_run"], dry.result["events_compressed"]) == (True, 3)
    assert job.state == "completed"
    assert job.result is not None
    assert (job.result["events_compressed"], job.result["entries_written"]) == (3, 1)
    assert default.items == []
    assert [e.id for e in compressed.items] == [e.id for e in events]
    assert all(e.compressed_at is not None for e in compressed.items)
    assert (entry.source, entry.importance) == ("compactor", 4)
    assert entry.summary is not None and "ROAS target to 4" in entry.summary
    assert (trace.entry_id, trace.job_id, trace.event_count) == (entry.id, job.id, 3)
    assert [(e.event_id, e.event_sha256) for e in trace.events] \
        == [(e.id, e.content_sha256) for e in events]
    assert (thresholds.min_events, thresholds.older_than_days, thresholds.enabled) \
        == (5, 30, True)
    assert read_back == thresholds


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_client_runs_the_compactor(tenant: Tenant, anyio_backend: str) -> None:
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
        job = await client.jobs.wait((await client.compactor.run(dry_run=True)).id,
                                     timeout=60)
        config = await client.compactor.get_config()

    assert (job.state, job.result is not None) == ("completed", True)
    assert (config.min_events, config.older_than_days) == (3, 90)
