"""A memory written with ``searchable: false`` is never embedded (no vector in the bucket) and
never found by search; a later write that does not say keeps it, one that says true makes it
searchable again; the batch API and the LangGraph checkpointer write it so — on SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import memplane
from memplane.integrations.langgraph import MemplaneCheckpointer
from tests.search.test_search_api import _file, _index, _keys, _put, _search
from tests.support.service import Tenant

TEXT = "The hikers crossed the glacier at dawn with ropes and crampons."


def _vectors(tenant: Tenant) -> list[str]:
    return sorted(p.name for p in tenant.objects() if p.name.endswith(".vec"))


def test_an_unsearchable_memory_gets_no_vector_and_is_never_found(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        plain = _put(http, "team", "t-s", "plain", TEXT)
        hidden = _put(http, "team", "t-s", "hidden", TEXT, searchable=False)
        batch = http.post("/v1/memories:batch", json={"operations": [
            {"op": "set", "scope": "team", "scope_ref": "t-s", "key": "batched",
             "value": TEXT, "searchable": False}]})
        _index(tenant)
        found = _search(http, "glacier crampons dawn", scope="team", scope_ref="t-s")
        hidden_now = http.get("/v1/memories/team/t-s/hidden").json()["pointer"]
        batched_now = http.get("/v1/memories/team/t-s/batched").json()["pointer"]
        vectors = _vectors(tenant)
    assert batch.status_code == 200 and batch.json()["results"][0]["status"] == 200
    assert (plain["searchable"], hidden["searchable"]) == (True, False)
    assert _keys(found) == ["plain"]
    assert [(p["has_embeddings"], p["searchable"]) for p in (hidden_now, batched_now)] == [
        (False, False), (False, False)]
    plain_path = _file(tenant, plain["storage_path"])
    assert vectors == [plain_path.name + ".vec"]


def test_a_rewrite_keeps_it_unless_it_says_otherwise(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "team", "t-r", "note", TEXT, searchable=False)
        kept = _put(http, "team", "t-r", "note", TEXT + " Again.")
        _index(tenant)
        before = _keys(_search(http, "glacier crampons dawn", scope="team", scope_ref="t-r"))
        again = _put(http, "team", "t-r", "note", TEXT, searchable=True)
        _index(tenant)
        after = _keys(_search(http, "glacier crampons dawn", scope="team", scope_ref="t-r"))
        appended = http.post("/v1/memories/team/t-r/log/append", json={
            "value": TEXT, "searchable": False})
    assert (kept["searchable"], again["searchable"]) == (False, True)
    assert (before, after) == ([], ["note"])
    assert appended.status_code == 200 and appended.json()["searchable"] is False


def test_checkpoints_are_never_embedded(tenant: Tenant) -> None:
    with tenant.stack.client(tenant.key("agent")) as agent:
        saver = MemplaneCheckpointer(agent, user_id="u-cp")
        config = {"configurable": {"thread_id": "t-cp", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"said": [TEXT]}
        stored = saver.put(config, checkpoint, {"source": "loop", "step": 1}, {})
        saver.put_writes(stored, [("said", TEXT)], "task-1")
        _index(tenant)
        pointers = list(agent.memory.iter_pointers(scope="conversation", scope_ref="t-cp"))
    with memplane.Client(tenant.stack.base_url, tenant.admin_key) as admin:
        found = admin.memory.search(query="glacier crampons dawn", user_id="u-cp")
    assert len(pointers) == 2
    assert {(p.searchable, p.has_embeddings) for p in pointers} == {(False, False)}
    assert found.results == [] and _vectors(tenant) == []


@pytest.mark.databases("postgres")
def test_the_indexers_look_reads_the_index_of_memories_waiting_for_a_vector(
        tenant: Tenant) -> None:
    """Unsearchable memories and memories embedded already are not in that partial index,
    so the look costs what waits, however many of them the table holds. (SQLite may use
    it too; without statistics its planner prefers the (sync_status, updated_at) index.)"""
    from datetime import timedelta

    from sqlalchemy import text

    from control_plane.db.base import utcnow
    from control_plane.search import index_rows

    engine = tenant.stack.runtime.engine
    plans = []
    for since in (None, utcnow() - timedelta(seconds=60)):
        sql = str(index_rows.needing_vectors_query(since, 64).compile(
            dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
        with engine.connect() as conn:
            # Usable, not just cheap: no sequential scan, and the other index that orders by
            # updated_at dropped inside this transaction (rolled back), so the planner's
            # choice does not hang on the statistics other tests left in the table.
            conn.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            conn.exec_driver_sql("DROP INDEX ix_memory_pointers_sync_status_updated_at")
            plan = conn.execute(text("EXPLAIN " + sql)).scalars().all()
            conn.rollback()
        plans.append(" ".join(plan))
    assert all("ix_memory_pointers_wanting_vectors" in plan for plan in plans), plans
