"""MemplaneStore (LangGraph ``BaseStore``) against a live server, SQLite and PostgreSQL:
namespaces land at the documented, reversible addresses; puts, gets, deletes, searches and
namespace listings behave as LangGraph's stores do; values are only in the bucket, and
encrypted there; every access is audited; erasing a namespace's user removes what the store
held for them."""

from __future__ import annotations

import asyncio
import json
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp

import memplane
from memplane.integrations.langgraph import MemplaneStore
from tests.support.service import Tenant


@pytest.fixture
def agent(tenant: Tenant) -> Iterator[memplane.Client]:
    with tenant.stack.client(tenant.key("agent")) as client:
        yield client


def test_namespaces_map_to_documented_addresses_and_back(agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    store.put(("users", "u-1", "prefs"), "tone", {"tone": "brief"})
    store.put(("users", "u-1"), "name", {"name": "Ada"})
    store.put(("docs", "a/b", "c%d"), "k#1", {"n": 1})
    store.put(("docs",), "top", {"n": 2})

    pointers = {(p.scope, p.scope_ref, p.key): p.user_id for p in agent.memory.iter_pointers()}
    assert pointers == {
        ("user", "u-1", "lg-store/prefs/tone"): "u-1",
        ("user", "u-1", "lg-store/name"): "u-1",
        ("app", "docs", "lg-store/a%2Fb/c%25d/k%231"): None,
        ("app", "docs", "lg-store/top"): None,
    }
    got = store.get(("docs", "a/b", "c%d"), "k#1")
    assert got is not None
    assert (got.namespace, got.key, got.value) == (("docs", "a/b", "c%d"), "k#1", {"n": 1})
    assert store.list_namespaces() == [("docs",), ("docs", "a/b", "c%d"), ("users", "u-1"),
                                       ("users", "u-1", "prefs")]


def test_put_get_delete_and_batch_in_one_request(agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    ns = ("users", "u-2", "facts")
    results = store.batch([
        PutOp(ns, "a", {"v": 1}),
        PutOp(ns, "b", {"v": 2}),
        GetOp(ns, "a"),
        PutOp(ns, "b", None),
        GetOp(ns, "b"),
        GetOp(ns, "missing"),
    ])
    assert results[:2] == [None, None]
    first = results[2]
    assert isinstance(first, Item) and first.value == {"v": 1}
    assert results[3:] == [None, None, None]

    store.put(ns, "a", {"v": 10})
    again = store.get(ns, "a")
    assert again is not None and again.value == {"v": 10}
    assert again.created_at <= again.updated_at
    store.delete(ns, "a")
    assert store.get(ns, "a") is None
    store.delete(ns, "never-there")  # deleting a missing item is no error


def test_search_filters_pages_and_stays_under_the_prefix(agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    for n in range(5):
        store.put(("users", "u-3", "notes"), f"n{n}", {"n": n, "kind": "odd" if n % 2 else "even",
                                                      "meta": {"lang": "fr" if n < 2 else "en"}})
    store.put(("users", "u-3", "other"), "x", {"n": 99, "kind": "odd"})
    store.put(("users", "u-4", "notes"), "y", {"n": 100, "kind": "odd"})

    everything = store.search(("users", "u-3", "notes"), limit=10)
    assert [i.key for i in everything] == ["n4", "n3", "n2", "n1", "n0"]  # newest first
    assert all(i.namespace == ("users", "u-3", "notes") and i.score is None for i in everything)
    odd = store.search(("users", "u-3"), filter={"kind": "odd"}, limit=10)
    assert sorted(i.key for i in odd) == ["n1", "n3", "x"]
    assert [i.key for i in store.search(("users", "u-3", "notes"),
                                        filter={"n": {"$gte": 3}})] == ["n4", "n3"]
    assert [i.key for i in store.search(("users", "u-3", "notes"),
                                        filter={"meta": {"lang": "fr"}})] == ["n1", "n0"]
    assert [i.key for i in store.search(("users", "u-3", "notes"), limit=2,
                                        offset=1)] == ["n3", "n2"]
    assert [i.key for i in store.search(("users",), filter={"n": 100})] == ["y"]
    assert store.search(("users", "u-3", "nothing")) == []


def test_a_search_reads_only_the_newest_items_it_answers(tenant: Tenant,
                                                         agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    ns = ("users", "u-5", "notes")
    for n in range(25):  # one after another: each written later than the one before
        store.put(ns, f"k{n:02}", {"n": n})
    store.put(ns, "k03", {"n": 3, "again": True})  # written last: the newest
    sent: list[dict[str, str]] = []
    real = agent._send

    def spy(call: object) -> object:
        sent.append(dict(getattr(call, "params", None) or {}))
        return real(call)  # type: ignore[arg-type]

    with tenant.client() as admin:
        before = sum(1 for e in admin.audit.iter(operation="read"))
    agent._send = spy  # type: ignore[method-assign]
    try:
        newest = store.search(ns, limit=3)
        filtered = store.search(ns, filter={"n": {"$lt": 2}}, limit=5)
    finally:
        agent._send = real  # type: ignore[method-assign]
    with tenant.client() as admin:
        reads = sum(1 for e in admin.audit.iter(operation="read")) - before
    assert [i.key for i in newest] == ["k03", "k24", "k23"]
    assert [i.key for i in filtered] == ["k01", "k00"]
    # One listing of the ten newest with their values; the filter walks pages of ten to the
    # oldest. Each value listed is one read row: 10, then all 25.
    assert [(p["order"], p["limit"], p["include_values"]) for p in sent] == [
        ("updated_desc", "10", "true")] * 4
    assert reads == 10 + 25


def test_list_namespaces_with_prefix_suffix_depth_and_paging(agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("users", "u-5", "prefs"),
               ("x", "b", "c")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"),
                                                    ("a", "e")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("x", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"),
                                                        ("x", "b", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("users", "u-5"),
                                                  ("x", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]
    assert store.batch([ListNamespacesOp(match_conditions=(
        MatchCondition("prefix", ("users",)),), limit=10)]) == [[("users", "u-5", "prefs")]]


def test_async_methods_go_through_the_async_client(tenant: Tenant) -> None:
    key = tenant.key("agent")

    async def main() -> list[object]:
        async with memplane.AsyncClient(tenant.stack.base_url, key) as aclient:
            store = MemplaneStore(aclient=aclient)
            await store.aput(("users", "u-6"), "k", {"v": "async"})
            got = await store.aget(("users", "u-6"), "k")
            found = await store.asearch(("users", "u-6"))
            listed = await store.alist_namespaces()
            batched = await store.abatch([GetOp(("users", "u-6"), "k"),
                                          SearchOp(("users",), filter={"v": "async"})])
            await store.adelete(("users", "u-6"), "k")
            gone = await store.aget(("users", "u-6"), "k")
            return [got.value if got else None, [i.key for i in found], listed,
                    [batched[0].value, [i.key for i in batched[1]]], gone]

    assert asyncio.run(main()) == [{"v": "async"}, ["k"], [("users", "u-6")],
                                   [{"v": "async"}, ["k"]], None]
    with pytest.raises(RuntimeError, match="no memplane.Client for sync calls"):
        MemplaneStore(aclient=memplane.AsyncClient(tenant.stack.base_url, key)).get(("a",), "k")


def test_bad_values_and_namespaces_are_refused_with_a_sentence(agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    with pytest.raises(ValueError, match="must be a dict"):
        store.batch([PutOp(("a",), "k", ["not", "a", "dict"])])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="too deep or too long"):
        store.put(tuple(f"level{n}-" + "x" * 40 for n in range(6)), "k", {"v": 1})
    with pytest.raises(memplane.BadRequest, match="user_id: String should have at most 256"):
        store.put(("users", "u" * 300), "k", {"v": 1})


def test_user_ids_with_control_characters_are_encoded_reversibly(
        agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    store.put(("users", "alice"), "k", {"v": 1})
    store.put(("users", "alice\n"), "k", {"v": 2})
    store.put(("users", "org/7", "50%"), "k", {"v": 3})
    pointers = {(p.scope_ref, p.key, p.user_id) for p in agent.memory.iter_pointers()}
    assert pointers == {("alice", "lg-store/k", "alice"), ("alice%0A", "lg-store/k", "alice%0A"),
                        ("org/7", "lg-store/50%25/k", "org/7")}
    assert store.list_namespaces() == [("users", "alice"), ("users", "alice\n"),
                                       ("users", "org/7", "50%")]
    assert store.list_namespaces(prefix=("users", "alice")) == [("users", "alice")]
    got = store.get(("users", "alice\n"), "k")
    assert got is not None and got.value == {"v": 2}


def test_values_are_encrypted_in_the_bucket_and_every_access_is_audited(
        tenant: Tenant, agent: memplane.Client) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    store = MemplaneStore(agent)
    store.put(("users", "u-8", "prefs"), "secret", {"text": marker})
    assert store.get(("users", "u-8", "prefs"), "secret") is not None
    store.search(("users", "u-8"))

    objects = tenant.objects()
    assert len(objects) == 1
    assert marker.encode() not in objects[0].read_bytes()
    with tenant.client() as admin:
        rows = [(e.operation, e.success) for e in admin.audit.iter()
                if e.operation in ("write", "read", "list")]
        details = " ".join(e.detail or "" for e in admin.audit.iter())
    # put = write; get = read; search = one listing + one read.
    assert rows == [("write", True), ("read", True), ("list", True), ("read", True)]
    assert marker not in details


def test_erasing_the_namespace_user_removes_what_the_store_held(
        tenant: Tenant, agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    store.put(("users", "erased", "prefs"), "tone", {"tone": "brief"})
    store.put(("users", "erased"), "name", {"name": "Eve"})
    store.put(("users", "kept", "prefs"), "tone", {"tone": "long"})
    kept_objects = len(tenant.objects()) - 2
    with tenant.stack.client(tenant.key("compliance")) as officer:
        job = officer.jobs.wait(officer.memory.erase_user("erased").id, timeout=120)
    assert job.state == "completed", job.error

    assert store.search(("users", "erased")) == []
    assert store.get(("users", "erased"), "name") is None
    assert store.list_namespaces() == [("users", "kept", "prefs")]
    assert len(tenant.objects()) == kept_objects == 1


FACTS = {
    "lang": "The user prefers answers in French and short sentences.",
    "pet": "Their dog is called Biscuit and is afraid of thunderstorms.",
    "job": "Works as a nurse on night shifts at the city hospital.",
    "food": "Allergic to peanuts; loves spicy Thai curry.",
}


def _index(tenant: Tenant) -> None:
    from control_plane.search import indexer

    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        indexer.drain(session, runtime.plane, runtime, runtime.search_cache)


def test_a_query_ranks_with_the_servers_semantic_search(tenant: Tenant,
                                                        agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    for key, text in FACTS.items():
        store.put(("users", "u-9", "facts"), key, {"text": text})
    store.put(("users", "u-10", "facts"), "pet", {"text": FACTS["pet"]})
    agent.memory.set(scope="user", scope_ref="u-9", key="pet", value=FACTS["pet"],
                     tags=["langgraph"])  # not the store's: never returned
    _index(tenant)

    found = store.search(("users", "u-9"), query="dog afraid of thunderstorms", limit=2)
    assert [(i.namespace, i.key) for i in found][:1] == [(("users", "u-9", "facts"), "pet")]
    assert len(found) == 2 and found[0].value == {"text": FACTS["pet"]}
    assert found[0].score is not None and found[0].score > 0
    assert [i.key for i in store.search(("users", "u-9"), query="dog thunderstorms",
                                        filter={"text": FACTS["food"]})] == ["food"]
    everywhere = store.search(("users",), query="dog afraid of thunderstorms", limit=10)
    assert {(i.namespace[1], i.key) for i in everywhere if i.key == "pet"} == {
        ("u-9", "pet"), ("u-10", "pet")}
    # Not embedded yet: after the ranked hits, unscored, as LangGraph's stores fill a page.
    store.put(("users", "u-9", "facts"), "fresh", {"text": "a parrot named Kiwi"})
    filled = store.search(("users", "u-9"), query="dog afraid of thunderstorms", limit=10)
    assert sorted(i.key for i in filled) == ["food", "fresh", "job", "lang", "pet"]
    assert filled[0].key == "pet" and filled[-1].key == "fresh" and filled[-1].score is None
    plain = MemplaneStore(agent, semantic=False).search(("users", "u-9", "facts"), query="dog")
    assert [i.key for i in plain] == ["fresh", "food", "job", "pet", "lang"]  # newest first
    assert all(i.score is None for i in plain)
    with tenant.client() as admin:
        assert len(admin.audit.list(operation="search").items) == 4


def test_the_users_export_holds_what_the_store_keeps_for_them(
        tenant: Tenant, agent: memplane.Client, tmp_path: Path) -> None:
    store = MemplaneStore(agent)
    store.put(("users", "exported", "prefs"), "tone", {"tone": "brief"})
    store.put(("users", "other"), "tone", {"tone": "long"})
    with tenant.stack.client(tenant.key("compliance")) as officer:
        job = officer.jobs.wait(officer.memory.export(user_id="exported").id, timeout=120)
        assert job.state == "completed", job.error
        officer.exports.download(job.id, tmp_path / "export.zip")
    with zipfile.ZipFile(tmp_path / "export.zip") as z:
        manifest = json.loads(z.read("manifest.json"))
        values = [json.loads(z.read(item["file"])) for item in manifest["items"]]
    assert manifest["counts"]["pointers"] == 1
    assert values == [{"namespace": ["users", "exported", "prefs"], "key": "tone",
                       "value": {"tone": "brief"}}]


def test_an_item_put_with_index_false_is_not_searchable(agent: memplane.Client) -> None:
    store = MemplaneStore(agent)
    store.put(("users", "u-6", "notes"), "plain", {"text": "kept for search"})
    store.put(("users", "u-6", "notes"), "state", {"text": "graph state"}, index=False)
    searchable = {p.key: p.searchable for p in agent.memory.iter_pointers(scope_ref="u-6")}
    assert searchable == {"lg-store/notes/plain": True, "lg-store/notes/state": False}


def test_a_store_without_semantic_search_writes_unsearchable_unless_asked(
        agent: memplane.Client) -> None:
    store = MemplaneStore(agent, semantic=False)
    store.put(("users", "u-7", "notes"), "plain", {"text": "recency only"})
    store.put(("users", "u-7", "notes"), "asked", {"text": "embed me"}, index=["text"])
    store.batch([PutOp(("users", "u-7", "notes"), "batched", {"text": "also plain"})])
    searchable = {p.key: p.searchable for p in agent.memory.iter_pointers(scope_ref="u-7")}
    assert searchable == {"lg-store/notes/plain": False, "lg-store/notes/asked": True,
                          "lg-store/notes/batched": False}
    store.put(("users", "u-7", "notes"), "plain", {"text": "now indexed"}, index=True)
    searchable = {p.key: p.searchable for p in agent.memory.iter_pointers(scope_ref="u-7")}
    assert searchable["lg-store/notes/plain"] is True
