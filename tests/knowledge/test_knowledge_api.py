"""Knowledge documents (issue 12, point 4): POST/GET /v1/knowledge and
DELETE /v1/knowledge/{document_id}, on SQLite and PostgreSQL.

Each document is chunked and every chunk is a keyed memory written through the memories
write path: encrypted in the bucket, audited, idempotent, listed and deleted as one
document, invisible to scoped keys outside the agent, and left alone by a user's erasure.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from control_plane.db.models import AccessLog, MemoryPointer
from control_plane.kit import encode_cursor
from control_plane.knowledge.chunking import chunk
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support.crypto import open_stored
from tests.support.service import Tenant

SECRET_LINE = "The vault code for the Lisbon office is 7391-ALPHA."
HANDBOOK = "\n\n".join(
    f"Section {n}. Refunds are granted within {n + 10} days of delivery when the item is "
    f"unused and in its original packaging. The support agent checks the order number, the "
    f"delivery date and the photos the customer sends. " * 2 for n in range(3)
) + "\n\n" + SECRET_LINE
SHORT = "Support hours are 9:00 to 18:00 Lisbon time, Monday to Friday."


def post(http: httpx.Client, documents: list[dict[str, Any]], agent_id: str = "support-bot",
         key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return http.post("/v1/knowledge", json={"agent_id": agent_id, "documents": documents},
                     headers=headers)


def doc(title: str = "Refund policy", content: str = HANDBOOK,
        metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"title": title, "content": content,
            "metadata": metadata if metadata is not None else {"source": "handbook", "v": 3}}


def chunk_pointers(tenant: Tenant, document_id: str) -> list[MemoryPointer]:
    with tenant.stack.runtime.sessions() as session:
        return list(session.scalars(
            select(MemoryPointer).where(MemoryPointer.tenant_id == tenant.id,
                                        MemoryPointer.key.like(f"knowledge/{document_id}/%"))
            .order_by(MemoryPointer.key)))


def operations(tenant: Tenant, operation: str) -> list[tuple[bool, str]]:
    with tenant.stack.runtime.sessions() as session:
        return [(r.success, r.detail) for r in session.scalars(
            select(AccessLog).where(AccessLog.tenant_id == tenant.id,
                                    AccessLog.operation == operation).order_by(AccessLog.id))]


def test_add_stores_each_chunk_as_an_encrypted_keyed_memory(tenant: Tenant) -> None:
    pieces = chunk(HANDBOOK)
    assert len(pieces) == 3 and all(len(p) <= 901 for p in pieces)
    with tenant.stack.http(tenant.admin_key) as http:
        answer = post(http, [doc(), doc("Hours", SHORT, {})])
        assert answer.status_code == 201
        added = answer.json()
        first, second = added["documents"]
        assert added["agent_id"] == "support-bot"
        assert re.fullmatch(r"doc_[0-9a-f]{24}", first["document_id"])
        assert first == {"document_id": first["document_id"], "title": "Refund policy",
                         "chunk_count": 3, "characters": len(HANDBOOK)}
        assert second == {"document_id": second["document_id"], "title": "Hours",
                          "chunk_count": 1, "characters": len(SHORT)}
        read = http.get(f"/v1/memories/agent/support-bot/"
                        f"knowledge%2F{first['document_id']}%2F0002")
    assert read.status_code == 200
    assert read.json()["value"] == {
        "document_id": first["document_id"], "title": "Refund policy", "chunk_index": 2,
        "chunk_count": 3, "content": pieces[2], "metadata": {"source": "handbook", "v": 3}}
    assert SECRET_LINE in pieces[2]

    pointers = chunk_pointers(tenant, first["document_id"])
    assert [(p.scope_type, p.scope_ref, p.key, p.memory_type, p.title, p.agent_id,
             p.subject_user_id, p.sync_status) for p in pointers] == [
        ("agent", "support-bot", f"knowledge/{first['document_id']}/{i:04d}", "knowledge",
         "Refund policy", "support-bot", None, "synced") for i in range(3)]
    # encrypted in the bucket: the raw objects do not hold the text, and open to it
    objects = {p.as_posix(): p.read_bytes() for p in tenant.objects()}
    assert len(objects) == 4
    for pointer in pointers:
        [raw] = [data for path, data in objects.items() if path.endswith(pointer.storage_path)]
        assert b"vault code" not in raw and b"Refunds are granted" not in raw
        value = json.loads(open_stored(tenant.stack.runtime, tenant.id, pointer.storage_path,
                                       pointer.id, raw))
        assert value["content"] == pieces[value["chunk_index"]]
    assert "vault code" not in _database_text(tenant)  # no content in the control plane
    assert "handbook" not in _database_text(tenant)  # metadata stays in the bucket
    # one audited write per chunk, and the document-level row
    assert len([ok for ok, _ in operations(tenant, "write") if ok]) == 4
    assert operations(tenant, "knowledge_add") == [
        (True, f"documents {first['document_id']} (3 chunks), "
               f"{second['document_id']} (1 chunks)")]


def test_list_is_paginated_and_delete_removes_every_chunk(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        ids = sorted(d["document_id"] for d in post(http, [
            doc("A", HANDBOOK), doc("B", SHORT), doc("C", SHORT + " Closed on holidays.")]
        ).json()["documents"])
        post(http, [doc("Other agent", SHORT)], agent_id="sales-bot")
        page1 = http.get("/v1/knowledge", params={"agent_id": "support-bot", "limit": 2})
        page2 = http.get("/v1/knowledge", params={"agent_id": "support-bot", "limit": 2,
                                                  "cursor": page1.json()["next_cursor"]})
        assert page1.status_code == page2.status_code == 200
        listed = page1.json()["items"] + page2.json()["items"]
        # Opaque, as every cursor: the last id of the page in the server's cursor encoding.
        assert page1.json()["next_cursor"] == encode_cursor(ids[1])
        assert page2.json()["next_cursor"] is None
        assert [d["document_id"] for d in listed] == ids
        by_title = {d["title"]: d for d in listed}
        assert {t: d["chunk_count"] for t, d in by_title.items()} == {"A": 3, "B": 1, "C": 1}
        a = by_title["A"]
        assert a["size"] == sum(p.content_size for p in chunk_pointers(tenant,
                                                                       a["document_id"]))
        assert a["created_at"] is not None

        deleted = http.delete(f"/v1/knowledge/{a['document_id']}")
        assert deleted.json() == {"document_id": a["document_id"], "deleted_chunks": 3}
        again = http.delete(f"/v1/knowledge/{a['document_id']}")
        assert again.status_code == 404
        assert again.json() == {"error": "not_found",
                                "detail": f"no knowledge document {a['document_id']}"}
        bad = http.delete("/v1/knowledge/not-a-doc")
        assert bad.status_code == 422
        assert bad.json()["detail"] == ("document_id must look like 'doc_' followed by 24 "
                                        "lower-case hex digits, as POST /v1/knowledge "
                                        "answered")
        after = http.get("/v1/knowledge", params={"agent_id": "support-bot"}).json()
    assert sorted(d["title"] for d in after["items"]) == ["B", "C"]
    assert chunk_pointers(tenant, a["document_id"]) == []
    assert len(tenant.objects()) == 3  # B, C and the other agent's document
    assert len([ok for ok, _ in operations(tenant, "delete") if ok]) == 3
    assert operations(tenant, "knowledge_delete") == [
        (True, f"document {a['document_id']} (3 chunks)"),
        (False, f"document {a['document_id']} not_found: no knowledge document "
                f"{a['document_id']}"),
        (False, "document (invalid id) validation_error: document_id must look like 'doc_' "
                "followed by 24 lower-case hex digits, as POST /v1/knowledge answered")]
    assert [d for _, d in operations(tenant, "knowledge_list")] == [
        "2 documents", "1 documents", "2 documents"]


def test_a_retry_with_the_idempotency_key_writes_nothing_again(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = post(http, [doc(), doc("Hours", SHORT)], key="add-1")
        again = post(http, [doc(), doc("Hours", SHORT)], key="add-1")
        other = post(http, [doc("Changed")], key="add-1")
        listed = http.get("/v1/knowledge", params={"agent_id": "support-bot"}).json()
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"
    assert len(listed["items"]) == 2
    ids = [d["document_id"] for d in first.json()["documents"]]
    assert [p.version for i in ids for p in chunk_pointers(tenant, i)] == [1, 1, 1, 1]
    assert len([ok for ok, _ in operations(tenant, "write") if ok]) == 4


def test_a_retry_replays_each_chunk_already_written(tenant: Tenant) -> None:
    """Every chunk's write carries a key derived from the request's: a retry replays the
    chunks whose writes succeeded (even one deleted since) and writes only missing ones."""
    with tenant.stack.http(tenant.admin_key) as http:
        first = post(http, [doc()], key="add-2").json()
        document_id = first["documents"][0]["document_id"]
        gone = http.delete(f"/v1/memories/agent/support-bot/knowledge%2F{document_id}%2F0001")
        assert gone.status_code == 204
        retried = post(http, [doc()], key="add-2")
    assert retried.json() == first
    assert [(p.key or "")[-4:] for p in chunk_pointers(tenant, document_id)] == ["0000", "0002"]


@pytest.mark.parametrize(("documents", "detail"), [
    ([doc(content="")], "body.documents.0.content: Value error, content is empty; send the "
                        "document's text"),
    ([doc(content=" \n\t ")], "body.documents.0.content: Value error, content is empty; send "
                              "the document's text"),
    ([doc(content="x" * 200_001)], "body.documents.0.content: Value error, content is "
     "200,001 characters, over the limit of 200,000; split the document into several"),
    ([doc(SHORT)] * 21, "body.documents: List should have at most 20 items after validation, "
                        "not 21"),
    ([], "body.documents: List should have at least 1 item after validation, not 0"),
    ([doc(content="y" * 200_000)] * 6, "body.documents: Value error, the documents hold "
     "1,200,000 characters together, over the limit of 1,000,000 per request; send them in "
     "several requests"),
    ([doc(metadata={"blob": "z" * 9000})], "body.documents.0.metadata: Value error, metadata "
     "is 9012 bytes as JSON, over the limit of 8192; keep it to a few fields"),
    ([doc(title="")], "body.documents.0.title: String should have at least 1 character"),
    ([{"title": "t", "content": "c", "tags": ["x"]}],
     "body.documents.0.tags: Extra inputs are not permitted"),
], ids=["empty", "blank", "too-long", "too-many", "none", "request-too-large",
        "metadata-too-large", "no-title", "unknown-field"])
def test_bad_input_is_a_422_sentence(tenant: Tenant, documents: list[dict[str, Any]],
                                     detail: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = post(http, documents)
    assert answer.status_code == 422
    assert answer.json()["detail"] == detail
    assert tenant.objects() == []


def test_missing_agent_is_a_422_sentence(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.post("/v1/knowledge", json={"documents": [doc()]})
        listed = http.get("/v1/knowledge")
    assert (answer.status_code, answer.json()["detail"]) == (
        422, "body.agent_id: this field is required")
    assert (listed.status_code, listed.json()["detail"]) == (
        422, "query.agent_id: Field required")


def test_roles_and_tenants(tenant: Tenant, stack: Any) -> None:
    compliance = tenant.key("compliance")
    with tenant.stack.http(tenant.admin_key) as http:
        [added] = post(http, [doc("Hours", SHORT)]).json()["documents"]
    with tenant.stack.http(compliance) as http:
        assert post(http, [doc()]).status_code == 403
        assert http.delete(f"/v1/knowledge/{added['document_id']}").status_code == 403
        listed = http.get("/v1/knowledge", params={"agent_id": "support-bot"})
        assert [d["document_id"] for d in listed.json()["items"]] == [added["document_id"]]
    with tenant.stack.http() as anonymous:
        assert anonymous.get("/v1/knowledge",
                             params={"agent_id": "support-bot"}).status_code == 401
    other = stack.new_tenant()
    with other.stack.http(other.admin_key) as http:
        assert http.get("/v1/knowledge", params={"agent_id": "support-bot"}).json() == {
            "items": [], "next_cursor": None}
        assert http.delete(f"/v1/knowledge/{added['document_id']}").status_code == 404
    assert len(chunk_pointers(tenant, added["document_id"])) == 1


def test_a_scoped_key_adds_lists_and_deletes_only_its_agent(tenant: Tenant) -> None:
    with tenant.client() as admin:
        key = admin.keys.create(role="agent", name="bot", agent_id="support-bot",
                                scopes=[{"scope": "agent", "scope_ref": "support-bot"}]
                                ).api_key
    with tenant.stack.http(tenant.admin_key) as http:
        [outside] = post(http, [doc("Sales", SHORT)], agent_id="sales-bot").json()["documents"]
    with tenant.stack.http(key) as http:
        inside = post(http, [doc("Hours", SHORT)])
        refused = post(http, [doc("Sneaky", SHORT)], agent_id="sales-bot")
        hidden = http.get("/v1/knowledge", params={"agent_id": "sales-bot"})
        not_deleted = http.delete(f"/v1/knowledge/{outside['document_id']}")
        mine = http.get("/v1/knowledge", params={"agent_id": "support-bot"})
    assert inside.status_code == 201
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith(
        "this key's scopes do not include agent/sales-bot: ")
    assert hidden.json() == {"items": [], "next_cursor": None}
    assert not_deleted.json() == {"error": "not_found",
                                  "detail": f"no knowledge document {outside['document_id']}"}
    assert [d["title"] for d in mine.json()["items"]] == ["Hours"]
    assert len(chunk_pointers(tenant, outside["document_id"])) == 1


def test_a_user_erasure_leaves_the_agents_documents(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        [added] = post(http, [doc()]).json()["documents"]
        assert http.put("/v1/memories/user/u-erase/diet",
                        json={"value": {"diet": "vegetarian"}}).status_code == 200
    with tenant.client() as officer:
        done = officer.jobs.wait(officer.memory.erase_user("u-erase").id)
    assert done.state == "completed"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get("/v1/memories/user/u-erase/diet").status_code == 404
        listed = http.get("/v1/knowledge", params={"agent_id": "support-bot"}).json()
        read = http.get(f"/v1/memories/agent/support-bot/"
                        f"knowledge%2F{added['document_id']}%2F0000")
    assert [d["document_id"] for d in listed["items"]] == [added["document_id"]]
    assert read.json()["value"]["content"] == chunk(HANDBOOK)[0]
    assert len(tenant.objects()) == 3


def test_ids_are_unique_without_a_key(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        ids = [post(http, [doc("Hours", SHORT)]).json()["documents"][0]["document_id"]
               for _ in range(3)]
    assert len(set(ids)) == 3
    assert all(uuid.UUID(int=int(i[4:], 16)) for i in ids)


def test_documents_are_found_through_search_and_leave_with_their_delete(
        tenant: Tenant) -> None:
    from control_plane.search import indexer

    runtime = tenant.stack.runtime
    with tenant.stack.http(tenant.admin_key) as http:
        [refunds, hours] = post(http, [doc(), doc("Hours", SHORT)]).json()["documents"]
        with runtime.sessions() as session:
            indexer.drain(session, runtime.plane, runtime, runtime.search_cache)
        found = http.post("/v1/search", json={
            "query": "what is the vault code?", "scope": "agent",
            "scope_ref": "support-bot", "limit": 5}).json()
        top = found["results"][0]
        assert top["key"] == f"knowledge/{refunds['document_id']}/0002"
        assert top["value"]["content"] == chunk(HANDBOOK)[2]
        assert top["value"]["title"] == "Refund policy"
        assert any(p.as_posix().endswith(".vec") for p in tenant.objects())

        assert http.delete(f"/v1/knowledge/{refunds['document_id']}").status_code == 200
        again = http.post("/v1/search", json={
            "query": "what is the vault code?", "scope": "agent",
            "scope_ref": "support-bot", "limit": 5}).json()
    assert [r["key"] for r in again["results"]] == [f"knowledge/{hours['document_id']}/0000"]
    assert not any(refunds["document_id"] in p.as_posix() for p in tenant.objects())
