"""``POST /v1/search`` against a live server, on SQLite and PostgreSQL: the after-commit
indexer's vectors and segments in the bucket, hybrid ranking over memories, entries and
knowledge chunks, live filtering (overwrites, deletes, expiry), verified values, scoped
keys, roles and the audit row."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from control_plane.db.models import SearchSegment
from control_plane.search import indexer
from tests.support.service import Tenant


def _index(tenant: Tenant) -> indexer.RoundReport:
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
    assert pointer["embedding_model"] == "memplane-hash-v1"
    assert pointer["embedding_storage_path"] == pointer["storage_path"] + ".vec"
    assert found["embedder"] == "memplane-hash-v1"
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
    assert [(s.scope_type, s.scope_ref, s.kind, s.rows) for s in segments] == [
        ("user", "u-1", "delta", 4)]
