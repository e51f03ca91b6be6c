"""``POST /v1/search`` against a live server, on SQLite and PostgreSQL: the after-commit
indexer's vectors and segments in the bucket, hybrid ranking over memories, entries and
knowledge chunks, live filtering (overwrites, deletes, expiry), verified values, scoped
keys, roles and the audit row."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import select, update

from control_plane.db.base import utcnow
from control_plane.db.models import AccessLog, MemoryPointer, SearchSegment
from control_plane.search import indexer
from control_plane.search.embedding import RoundReport
from tests.support.crypto import tampered
from tests.support.service import Tenant


def _index(tenant: Tenant) -> RoundReport:
    runtime = tenant.stack.runtime
    with runtime.sessions() as session:
        return indexer.drain(session, runtime.plane, runtime, runtime.search_cache)


def _put(http: httpx.Client, scope: str, ref: str, key: str, value: Any,
         **meta: Any) -> dict[str, Any]:
    answer = http.put(f"/v1/memories/{scope}/{ref}/{key}", json={"value": value} | meta)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _search(http: httpx.Client, query: str, **body: Any) -> dict[str, Any]:
    answer = http.post("/v1/search", json={"query": query} | body)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _keys(found: dict[str, Any]) -> list[str | None]:
    return [r["key"] for r in found["results"]]


FACTS = {
    "lang": "The user prefers answers in French and short sentences.",
    "pet": "Their dog is called Biscuit and is afraid of thunderstorms.",
    "job": "Works as a nurse on night shifts at the city hospital.",
    "food": "Allergic to peanuts; loves spicy Thai curry.",
}


def test_a_write_is_indexed_after_its_commit_and_found(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        written = {k: _put(http, "user", "u-1", k, v) for k, v in FACTS.items()}
        assert all(p["has_embeddings"] is False for p in written.values())
        report = _index(tenant)
        assert report.embedded >= 4
        pointer = http.get("/v1/memories/user/u-1/pet").json()["pointer"]
        found = _search(http, "dog afraid of thunderstorms", scope="user", scope_ref="u-1",
                        limit=2)

    assert pointer["has_embeddings"] is True
    assert pointer["embedding_model"] == "memplane-hash-v2"
    assert pointer["embedding_storage_path"] == pointer["storage_path"] + ".vec"
    assert found["embedder"] == "memplane-hash-v2"
    assert _keys(found)[0] == "pet"
    top = found["results"][0]
    assert (top["kind"], top["scope"], top["scope_ref"]) == ("memory", "user", "u-1")
    assert top["value"] == FACTS["pet"]
    assert top["score"] > 0
    vector = tenant.bucket_dir / pointer["embedding_storage_path"].split(
        f"tenants/{tenant.id}/", 1)[1]
    assert vector.exists()
    assert b"Biscuit" not in vector.read_bytes()  # sealed like the content
    with tenant.stack.engine.connect() as conn:
        segments = conn.execute(select(SearchSegment).where(
            SearchSegment.tenant_id == tenant.id)).all()
    # The indexer's rounds take the oldest waiting pointers of every tenant on the shared
    # database, 64 at a time: other tests' leftovers may split these four into two rounds,
    # each writing its own delta.
    assert {(s.scope_type, s.scope_ref, s.kind) for s in segments} == {("user", "u-1", "delta")}
    assert sum(s.rows for s in segments) == 4


def _file(tenant: Tenant, storage_path: str) -> Any:
    return tenant.bucket_dir / storage_path.split(f"tenants/{tenant.id}/", 1)[1]


def test_overwrites_deletes_and_expiry_drop_out_at_once(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for key, value in FACTS.items():
            _put(http, "team", "t-1", key, value)
        _put(http, "team", "t-1", "ttl", "Biscuit the dog visits on Sundays.", ttl_days=1)
        _index(tenant)
        before = _keys(_search(http, "dog Biscuit", scope="team", scope_ref="t-1"))
        old = http.get("/v1/memories/team/t-1/pet").json()["pointer"]
        # Overwritten and deleted before the indexer runs again: gone from results at once.
        _put(http, "team", "t-1", "pet", "Owns a grey cat named Pixel.")
        assert http.delete("/v1/memories/team/t-1/ttl").status_code == 204
        after = _keys(_search(http, "dog Biscuit", scope="team", scope_ref="t-1"))
        new = http.get("/v1/memories/team/t-1/pet").json()["pointer"]
        _index(tenant)
        reindexed = _search(http, "cat named Pixel", scope="team", scope_ref="t-1", limit=1)
        newest = http.get("/v1/memories/team/t-1/pet").json()["pointer"]

    assert set(before[:2]) == {"pet", "ttl"}
    assert "pet" not in after and "ttl" not in after
    assert new["has_embeddings"] is False  # its vector is for the old value
    assert _keys(reindexed) == ["pet"]
    assert reindexed["results"][0]["value"] == "Owns a grey cat named Pixel."
    assert newest["has_embeddings"] is True
    assert not _file(tenant, old["embedding_storage_path"]).exists()  # replaced vector gone
    assert _file(tenant, newest["embedding_storage_path"]).exists()


def test_expired_memories_never_appear(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "agent", "a-1", "soon", "Biscuit the dog", ttl_days=1)
        _index(tenant)
        with tenant.stack.engine.begin() as conn:
            conn.execute(update(MemoryPointer).where(MemoryPointer.tenant_id == tenant.id)
                         .values(expires_at=utcnow()))
        found = _search(http, "Biscuit dog", scope="agent", scope_ref="a-1")
    assert found["results"] == []


def test_entries_and_knowledge_chunks_are_searched_with_filters(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        entry = http.post("/v1/entries", json={
            "scope": "entity", "scope_ref": "acme", "title": "Quarterly review",
            "summary": "Acme agreed a ROAS target of 4 for Q3.", "tags": ["q3"]}).json()
        _put(http, "entity", "acme", "doc-1.c0", {"content": "Refund policy: thirty days to "
                                                 "return any unopened product.",
                                                 "title": "Refunds"},
             memory_type="knowledge", title="Refunds", tags=["policy"])
        _put(http, "entity", "acme", "note", "ROAS target discussion postponed.", tags=["q3"])
        _index(tenant)
        everything = _search(http, "ROAS target refund policy", scope="entity",
                             scope_ref="acme")
        knowledge = _search(http, "return a product", memory_type="knowledge")
        tagged = _search(http, "ROAS target", tags=["q3"], include_values=False)

    kinds = {r["kind"]: r for r in everything["results"]}
    assert set(kinds) == {"entry", "knowledge", "memory"}
    assert kinds["entry"]["pointer_id"] == entry["id"]
    assert kinds["entry"]["value"] == "Acme agreed a ROAS target of 4 for Q3."
    assert kinds["knowledge"]["value"]["title"] == "Refunds"
    assert [(r["kind"], r["key"]) for r in knowledge["results"]] == [("knowledge", "doc-1.c0")]
    assert {r["kind"] for r in tagged["results"]} == {"entry", "memory"}
    assert all(r["value"] is None for r in tagged["results"])


def test_scoped_keys_roles_and_bad_input(tenant: Tenant) -> None:
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="bot", agent_id="bot",
                                   scopes=[{"scope": "team", "scope_ref": "mine"}]).api_key
    compliance = tenant.key("compliance")
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "team", "mine", "a", "Biscuit the dog")
        _put(http, "team", "theirs", "b", "Biscuit the dog again")
        _index(tenant)
    with tenant.stack.http(scoped) as http:
        everywhere = _search(http, "Biscuit dog")
        refused = http.post("/v1/search", json={"query": "dog", "scope": "team",
                                                "scope_ref": "theirs"})
        no_scope = http.post("/v1/search", json={"query": "dog", "scope_ref": "mine"})
        empty = http.post("/v1/search", json={"query": "   "})
        too_many = http.post("/v1/search", json={"query": "dog", "limit": 101})
    with tenant.stack.http(compliance) as http:
        officer = _search(http, "Biscuit dog")
    other = tenant.stack.new_tenant()
    with tenant.stack.http(other.admin_key) as http:
        foreign = _search(http, "Biscuit dog")

    assert [(r["scope_ref"], r["key"]) for r in everywhere["results"]] == [("mine", "a")]
    assert refused.json() == {"error": "not_found", "detail": "no scope team/theirs"}
    assert no_scope.status_code == 422
    assert "scope_ref needs scope" in no_scope.json()["detail"]
    assert empty.status_code == 422
    assert too_many.status_code == 422
    assert {r["key"] for r in officer["results"]} == {"a", "b"}
    assert foreign["results"] == []


def test_a_search_is_audited_once_without_the_query(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        for key, value in FACTS.items():
            _put(http, "user", "u-9", key, value)
        _index(tenant)
        found = _search(http, "peanuts allergy curry", scope="user", scope_ref="u-9", limit=2)
    with tenant.stack.engine.connect() as conn:
        rows = conn.execute(select(AccessLog.operation, AccessLog.detail, AccessLog.pointer_id,
                                   AccessLog.accessed_at, AccessLog.success)
                            .where(AccessLog.tenant_id == tenant.id,
                                   AccessLog.operation.in_(("search", "read")))
                            .order_by(AccessLog.id)).all()
    assert len(found["results"]) == 2
    # The search row and its values' read rows: one insert, committed before the answer.
    assert [r[0] for r in rows] == ["search", "read", "read"]
    assert len({r[3] for r in rows}) == 1 and {r[4] for r in rows} == {True}
    assert [r[1] for r in rows if r[0] == "search"] == [
        "scope=user ref=(given) user=None type=None tags=0 -> 2"]
    assert sorted(str(r[2]) for r in rows if r[0] == "read") == sorted(
        r["pointer_id"] for r in found["results"])
    assert not any("peanut" in (r[1] or "") or "u-9" in (r[1] or "") for r in rows)


def test_a_corrupt_result_is_dropped_marked_and_audited(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, "agent", "a-7", "pet", FACTS["pet"])
        _put(http, "agent", "a-7", "pet2", "A dog called Biscuit barks at thunder.")
        _index(tenant)
        pointer = http.get("/v1/memories/agent/a-7/pet").json()["pointer"]
        stored = _file(tenant, pointer["storage_path"])
        stored.write_bytes(tampered(stored.read_bytes()))
        tenant.stack.runtime.search_cache.values.clear()
        found = _search(http, "dog Biscuit thunderstorms", scope="agent", scope_ref="a-7")
    with tenant.stack.engine.connect() as conn:
        status = conn.scalar(select(MemoryPointer.sync_status)
                             .where(MemoryPointer.id == uuid.UUID(pointer["id"])))
        failures = conn.execute(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.success.is_(False))).scalars().all()
    assert _keys(found) == ["pet2"]
    assert status == "corrupt"
    assert len(failures) == 1 and failures[0].startswith("hash_mismatch: object ")
