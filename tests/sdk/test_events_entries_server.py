"""``client.events``, ``client.entries``, ``client.compactor`` and ``client.summarizer``
against a live server, on SQLite and PostgreSQL, with the sync and the async client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import memplane
from tests.support.service import Tenant

CALL = "## Call with Acme\n- Agreed to raise the ROAS target to 4."


def test_events_round_trip_and_pages(tenant: Tenant) -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    with tenant.client() as client:
        first = client.events.append("entity", "ent_acme", "call_summary", CALL,
                                     source="call", source_ref="call-1", occurred_at=start,
                                     user_id="u1", idempotency_key="ev-1")
        retried = client.events.append("entity", "ent_acme", "call_summary", CALL,
                                       source="call", source_ref="call-1", occurred_at=start,
                                       user_id="u1", idempotency_key="ev-1")
        for n in range(1, 5):
            client.events.append("entity", "ent_acme", "decision", f"decision {n}",
                                 occurred_at=start + timedelta(days=n))
        read = client.events.get(first.id)
        page = client.events.list(scope="entity", scope_ref="ent_acme", limit=2)
        every = [e.kind for e in client.events.iter(scope="entity", scope_ref="ent_acme",
                                                   limit=2)]
        window = [e.occurred_at.day for e in client.events.iter(
            kind="decision", since=start + timedelta(days=2), until=start + timedelta(days=4))]
        with pytest.raises(memplane.NotFound):
            client.events.get("00000000-0000-4000-8000-000000000001")

    assert retried == first
    assert (first.scope, first.scope_ref, first.kind, first.source, first.source_ref,
            first.user_id, first.occurred_at, first.compressed_at) == (
        "entity", "ent_acme", "call_summary", "call", "call-1", "u1", start, None)
    assert isinstance(read, memplane.EventWithBody)
    assert (read.body, read.id, read.content_sha256) == (CALL, first.id, first.content_sha256)
    assert ([e.id for e in page.items][0], len(page.items), page.next_cursor is not None) \
        == (first.id, 2, True)
    assert every == ["call_summary", "decision", "decision", "decision", "decision"]
    assert window == [3, 4]


def test_entries_round_trip_search_and_errors(tenant: Tenant) -> None:
    with tenant.client() as client:
        entry = client.entries.create("entity", "ent_acme", "Acme: ROAS target",
                                      "Acme agreed a **ROAS target of 4**.",
                                      tags=["decision"], importance=4, source="call")
        client.entries.create("entity", "ent_acme", "Budget", "Q3 budget is 40k",
                              importance=2)
        read = client.entries.get(entry.id)
        found = client.entries.list(scope="entity", scope_ref="ent_acme", search="roas")
        important = [e.title for e in client.entries.iter(scope="entity",
                                                          scope_ref="ent_acme",
                                                          min_importance=3)]
        tagged = client.entries.list(tag="decision", include_summary=True)
        updated = client.entries.update(entry.id, title="Acme: ROAS target",
                                        summary="ROAS target now **5**.", tags=["okr"],
                                        importance=5, source="manual")
        with pytest.raises(memplane.BadRequest) as compactor_only:
            client.entries.create("entity", "ent_acme", "t", "s", source="compactor")
        client.entries.delete(entry.id)
        with pytest.raises(memplane.NotFound):
            client.entries.get(entry.id)
        with pytest.raises(memplane.NotFound):
            client.entries.delete(entry.id)

    assert isinstance(entry, memplane.Entry)
    assert (entry.key, entry.memory_type, entry.tags, entry.importance, entry.source,
            entry.summary) == (None, "entry", ["decision"], 4, "call",
                               "Acme agreed a **ROAS target of 4**.")
    assert read.summary == entry.summary
    assert [(e.id, e.summary) for e in found.items] == [(entry.id, entry.summary)]
    assert important == ["Acme: ROAS target"]
    assert [(e.id, e.summary) for e in tagged.items] == [(entry.id, entry.summary)]
    assert (updated.summary, updated.tags, updated.importance, updated.source,
            updated.version) == ("ROAS target now **5**.", ["okr"], 5, "manual", 2)
    assert compactor_only.value.status_code == 422
    assert "compactor" in compactor_only.value.detail


def test_roles_reach_the_sdk_as_its_errors(tenant: Tenant) -> None:
    with tenant.stack.client(tenant.key("compliance")) as officer:
        with pytest.raises(memplane.Forbidden):
            officer.events.append("entity", "ent_acme", "decision", "b")
        with pytest.raises(memplane.Forbidden):
            officer.entries.create("entity", "ent_acme", "t", "s")
        assert officer.entries.list().items == []
    with tenant.stack.client("mp_not_a_key") as stranger, pytest.raises(memplane.Unauthorized):
        stranger.events.list()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_client_against_the_server(tenant: Tenant, anyio_backend: str) -> None:
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
        event = await client.events.append("project", "p-1", "campaign_change", "Paused ads",
                                           idempotency_key="a-1")
        read = await client.events.get(event.id)
        kinds = [e.kind async for e in client.events.iter(scope="project", scope_ref="p-1")]
        entry = await client.entries.create("project", "p-1", "Ads paused", "Paused ads.",
                                            tags=["ops"])
        listed = await client.entries.list(scope="project", scope_ref="p-1",
                                           include_summary=True)
        await client.entries.delete(entry.id)
        with pytest.raises(memplane.NotFound):
            await client.entries.get(entry.id)

    assert (read.body, kinds) == ("Paused ads", ["campaign_change"])
    assert [(e.id, e.summary, e.tags) for e in listed.items] == [(entry.id, "Paused ads.",
                                                                 ["ops"])]
