"""TTLs as LangGraph keeps them, on a live server (SQLite and PostgreSQL): minutes, not whole
days (the memory's ``ttl_seconds``), restarted by a read that asks (``refresh_ttl``, one
control-plane update, no new version), expired memories reading as missing; and an item put
with ``index=False`` never found by search."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import memplane
from memplane.integrations.langgraph import MemplaneStore
from tests.integrations.test_langgraph_store import _index
from tests.support.service import Tenant


@pytest.fixture
def agent(tenant: Tenant) -> Iterator[memplane.Client]:
    with tenant.stack.client(tenant.key("agent")) as client:
        yield client


def _pointer(agent: memplane.Client, key: str) -> memplane.Pointer:
    (pointer,) = [p for p in agent.memory.iter_pointers(scope="app", scope_ref="ttl")
                  if p.key == f"lg-store/{key}"]
    return pointer


def test_a_ttl_in_minutes_sets_expires_at_to_the_minute(agent: memplane.Client) -> None:
    store = MemplaneStore(agent, ttl={"default_ttl": 5})
    store.put(("ttl",), "default", {"v": 1})
    store.put(("ttl",), "own", {"v": 2}, ttl=90.5)
    store.put(("ttl",), "none", {"v": 3}, ttl=None)
    lives = {key: (p.expires_at - p.updated_at if p.expires_at else None)
             for key in ("default", "own", "none") for p in [_pointer(agent, key)]}
    assert lives == {"default": timedelta(minutes=5), "own": timedelta(minutes=90, seconds=30),
                     "none": None}


def test_a_read_with_refresh_ttl_restarts_the_ttl_and_writes_nothing(
        tenant: Tenant, agent: memplane.Client) -> None:
    store = MemplaneStore(agent, ttl={"default_ttl": 10, "refresh_on_read": False})
    store.put(("ttl",), "k", {"v": 1})
    before = _pointer(agent, "k")
    assert before.expires_at is not None
    time.sleep(1.1)
    assert store.get(("ttl",), "k") is not None  # refresh_on_read False: unmoved
    assert _pointer(agent, "k").expires_at == before.expires_at
    with tenant.stack.http(tenant.key("agent")) as http:
        answer = http.get("/v1/memories/app/ttl/lg-store%2Fk", params={"refresh_ttl": "true"})
    assert answer.status_code == 200
    after = _pointer(agent, "k")
    moved = datetime.fromisoformat(answer.json()["pointer"]["expires_at"])
    assert after.expires_at == moved
    assert timedelta(seconds=1) < moved - before.expires_at < timedelta(seconds=30)
    assert (after.version, after.updated_at) == (before.version, before.updated_at)
    time.sleep(1.1)
    store.get(("ttl",), "k", refresh_ttl=True)  # asked, but the store does not refresh on read
    assert _pointer(agent, "k").expires_at == moved
    store = MemplaneStore(agent, ttl={"default_ttl": 10, "refresh_on_read": True})
    store.get(("ttl",), "k")  # the batch's get; the ttl is still 10 minutes
    again = _pointer(agent, "k").expires_at
    assert again is not None and timedelta(seconds=1) < again - moved < timedelta(seconds=30)
    assert again - utc_now() > timedelta(minutes=9, seconds=50)
    time.sleep(0.2)
    assert [i.key for i in store.search(("ttl",), refresh_ttl=False)] == ["k"]
    assert _pointer(agent, "k").expires_at == again
    assert [i.key for i in store.search(("ttl",))] == ["k"]
    last = _pointer(agent, "k").expires_at
    assert last is not None and last > again


def utc_now() -> datetime:
    return datetime.now(UTC)


def test_an_expired_item_reads_as_missing_and_a_refresh_does_not_revive_it(
        tenant: Tenant, agent: memplane.Client) -> None:
    store = MemplaneStore(agent, ttl={"default_ttl": 1 / 60, "refresh_on_read": True})
    store.put(("ttl",), "brief", {"v": 1})
    assert store.get(("ttl",), "brief") is not None  # refreshed: one more second
    time.sleep(2.2)
    assert store.get(("ttl",), "brief") is None
    assert store.search(("ttl",)) == []
    with tenant.stack.http(tenant.key("agent")) as http:
        answer = http.get("/v1/memories/app/ttl/lg-store%2Fbrief", params={"refresh_ttl": "true"})
        both = http.put("/v1/memories/app/ttl/x", json={"value": 1, "ttl_days": 1,
                                                         "ttl_seconds": 60})
        refresh_a_set = http.post("/v1/memories:batch", json={"operations": [
            {"op": "set", "scope": "app", "scope_ref": "ttl", "key": "y", "value": 1,
             "refresh_ttl": True},
            {"op": "get", "scope": "app", "scope_ref": "ttl", "key": "y"}]})
    with tenant.stack.http(tenant.key("compliance")) as officer:
        refused = officer.get("/v1/memories/app/ttl/lg-store%2Fbrief",
                              params={"refresh_ttl": "true"})
        in_batch = officer.post("/v1/memories:batch", json={"operations": [
            {"op": "get", "scope": "app", "scope_ref": "ttl", "key": "y", "refresh_ttl": True}]})
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert "restart a memory's ttl" in refused.json()["detail"]
    assert in_batch.status_code == 403
    assert answer.status_code == 404
    assert both.status_code == 422 and "ttl_days or ttl_seconds, not both" in both.text
    assert [r["status"] for r in refresh_a_set.json()["results"]] == [422, 404]
    assert "refresh_ttl is for get only" in refresh_a_set.json()["results"][0]["detail"]


def test_an_item_put_with_index_false_is_never_found_by_search(
        tenant: Tenant, agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    store.put(("docs",), "hidden", {"text": "the blue whale migrates in winter"}, index=False)
    store.put(("docs",), "shown", {"text": "the blue whale migrates in winter"})
    pointers = {p.key: p.searchable for p in agent.memory.iter_pointers(scope="app")}
    assert pointers == {"lg-store/hidden": False, "lg-store/shown": True}
    _index(tenant)
    hits = agent.memory.search("blue whale migrates", limit=10)
    assert [h.key for h in hits.results] == ["lg-store/shown"]
    assert [i.key for i in store.search(("docs",), query="blue whale", limit=10)] == [
        "shown", "hidden"]  # ranked first, then the rest newest first, as LangGraph fills
