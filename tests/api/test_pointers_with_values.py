"""``GET /v1/pointers?include_values=true``: a page of memories by key, each with its value
read from the bucket and verified as a read is, each read audited; a tampered object fails
the page and is marked corrupt; pointers being written or deleted and entries are left
out; the page is at most 100 — on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import select, update

import memplane
from control_plane.db.models import AccessLog, MemoryPointer
from tests.support.crypto import tampered
from tests.support.service import Tenant


def _put(http: httpx.Client, ref: str, key: str, value: Any) -> str:
    answer = http.put(f"/v1/memories/conversation/{ref}/{key}", json={"value": value})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def _audit(tenant: Tenant, since: Any) -> list[tuple[str, str | None, str]]:
    with tenant.stack.engine.connect() as conn:
        rows = conn.execute(select(AccessLog.operation, AccessLog.pointer_id, AccessLog.detail)
                            .where(AccessLog.tenant_id == tenant.id, AccessLog.id > since)
                            .order_by(AccessLog.id)).all()
    return [(op, str(pid) if pid else None, detail) for op, pid, detail in rows]


def _last_audit_id(tenant: Tenant) -> Any:
    with tenant.stack.engine.connect() as conn:
        return conn.scalar(select(AccessLog.id).where(AccessLog.tenant_id == tenant.id)
                           .order_by(AccessLog.id.desc()).limit(1))


def test_a_page_with_values_answers_each_memory_verified_and_audits_each_read(
        tenant: Tenant) -> None:
    ref = f"t-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        ids = {key: _put(http, ref, key, {"n": n, "text": f"value {key}"})
               for n, key in enumerate(("a", "b", "c", "d", "e"))}
        _put(http, f"{ref}-other", "a", {"n": 99})
        http.post("/v1/entries", json={"scope": "conversation", "scope_ref": ref,
                                       "title": "no key", "summary": "s"}).raise_for_status()
        since = _last_audit_id(tenant)
        pages, cursor = [], None
        while True:
            params = {"scope": "conversation", "scope_ref": ref, "order": "key_desc",
                      "limit": "2", "include_values": "true"}
            if cursor:
                params["cursor"] = cursor
            answer = http.get("/v1/pointers", params=params)
            assert answer.status_code == 200, answer.text
            pages.append(answer.json()["items"])
            cursor = answer.json()["next_cursor"]
            if cursor is None:
                break
        plain = http.get("/v1/pointers", params={"scope": "conversation", "scope_ref": ref,
                                                 "key_prefix": "a"}).json()["items"]
    items = [item for page in pages for item in page]
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [(i["pointer"]["key"], i["value"]) for i in items] == [
        (key, {"n": n, "text": f"value {key}"})
        for n, key in reversed(list(enumerate(("a", "b", "c", "d", "e"))))]
    assert [i["pointer"]["id"] for i in items] == [ids[k] for k in "edcba"]
    assert "value" not in plain[0] and plain[0]["key"] == "a"  # without the flag: pointers
    rows = _audit(tenant, since)
    lists = [detail for op, _, detail in rows if op == "list"]
    reads = [(pid, detail) for op, pid, detail in rows if op == "read"]
    assert lists[:3] == [f"pointers with values scope=conversation ref=(given) user=None "
                         f"tag=None prefix=None -> {n}" for n in (2, 2, 1)]
    assert reads == [(ids[k], "conversation (listed)") for k in "edcba"]


def test_a_tampered_object_fails_the_page_and_is_marked_corrupt(tenant: Tenant) -> None:
    ref = f"t-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        ids = [_put(http, ref, key, {"secret": f"words {key}"}) for key in ("a", "b", "c")]
        with tenant.stack.engine.connect() as conn:
            path = conn.scalar(select(MemoryPointer.storage_path).where(
                MemoryPointer.id == uuid.UUID(ids[1])))
        stored = tenant.bucket_dir / path.split(f"tenants/{tenant.id}/", 1)[1]
        stored.write_bytes(tampered(stored.read_bytes()))
        params = {"scope": "conversation", "scope_ref": ref, "include_values": "true"}
        listed = http.get("/v1/pointers", params=params)
        again = http.get("/v1/pointers", params=params)
    assert listed.status_code == 409, listed.text
    assert listed.json()["error"] == "hash_mismatch"
    assert "words" not in listed.text
    # Marked corrupt, it is still listed (a read of it answers 409 again, as here).
    assert again.status_code == 409 and again.json()["error"] == "hash_mismatch"
    with tenant.stack.engine.connect() as conn:
        status = {str(p.id): p.sync_status for p in conn.execute(select(MemoryPointer).where(
            MemoryPointer.id.in_([uuid.UUID(i) for i in ids])))}
    assert status == {ids[0]: "synced", ids[1]: "corrupt", ids[2]: "synced"}


def test_memories_being_written_or_deleted_are_left_out(tenant: Tenant) -> None:
    ref = f"t-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        ids = [_put(http, ref, key, {"k": key}) for key in ("a", "b", "c")]
        with tenant.stack.engine.begin() as conn:
            for pointer_id, status in ((ids[0], "pending_write"), (ids[2], "pending_delete")):
                conn.execute(update(MemoryPointer).where(
                    MemoryPointer.id == uuid.UUID(pointer_id)).values(sync_status=status))
        with_values = http.get("/v1/pointers", params={
            "scope": "conversation", "scope_ref": ref, "include_values": "true"})
        without = http.get("/v1/pointers", params={"scope": "conversation", "scope_ref": ref})
    assert with_values.status_code == 200, with_values.text
    assert [(i["pointer"]["key"], i["value"]) for i in with_values.json()["items"]] == [
        ("b", {"k": "b"})]
    assert len(without.json()["items"]) == 3


def test_a_page_with_values_is_at_most_100_and_says_so(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        since = _last_audit_id(tenant)
        too_many = http.get("/v1/pointers", params={"include_values": "true", "limit": "101"})
        fine = http.get("/v1/pointers", params={"include_values": "true", "limit": "100"})
        plain = http.get("/v1/pointers", params={"limit": "1000"})
    with tenant.stack.http("mp_not_a_key") as anonymous:
        unauthenticated = anonymous.get("/v1/pointers", params={"include_values": "true",
                                                                  "limit": "101"})
    assert too_many.status_code == 422
    assert too_many.json()["detail"] == ("with include_values, limit must be between 1 and "
                                         "100; ask for a smaller page")
    assert unauthenticated.status_code == 401  # the key is checked first
    assert fine.status_code == 200 and plain.status_code == 200
    assert [op for op, _, _ in _audit(tenant, since)] == ["list", "list"]


def test_a_scoped_key_lists_values_only_where_it_may_read(tenant: Tenant) -> None:
    mine, theirs = (f"t-{uuid.uuid4().hex[:8]}" for _ in range(2))
    with tenant.stack.http(tenant.admin_key) as http:
        _put(http, mine, "k", {"owner": "mine"})
        _put(http, theirs, "k", {"owner": "theirs"})
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="scoped",
                                   scopes=[("conversation", mine)]).api_key
    with memplane.Client(tenant.stack.base_url, scoped) as client:
        page = client.memory.list_memories(scope="conversation")
    assert [(m.pointer.scope_ref, m.value) for m in page.items] == [(mine, {"owner": "mine"})]


def test_a_listing_by_last_write_walks_newest_first_page_by_page(tenant: Tenant) -> None:
    ref = f"t-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        for key in ("a", "b", "c", "d", "e"):
            _put(http, ref, key, {"k": key, "round": 1})
        entry = http.post("/v1/entries", json={"scope": "conversation", "scope_ref": ref,
                                               "title": "no key", "summary": "s"}).json()
        _put(http, ref, "b", {"k": "b", "round": 2})

        def walk(limit: int, **extra: str) -> list[tuple[str | None, Any]]:
            seen: list[tuple[str | None, Any]] = []
            cursor = None
            while True:
                params = {"scope": "conversation", "scope_ref": ref, "order": "updated_desc",
                          "limit": str(limit), **extra}
                if cursor:
                    params["cursor"] = cursor
                answer = http.get("/v1/pointers", params=params)
                assert answer.status_code == 200, answer.text
                page = answer.json()
                seen += [(i["pointer"]["key"], i["value"]) if "value" in i else (i["key"], None)
                         for i in page["items"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    return seen

        pointers, with_values = walk(2), walk(2, include_values="true")
        by_key = http.get("/v1/pointers", params={"scope": "conversation", "scope_ref": ref,
                                                  "order": "key", "limit": "1"}).json()
        mixed = http.get("/v1/pointers", params={"order": "updated_desc",
                                                 "cursor": by_key["next_cursor"]})
    assert [key for key, _ in pointers] == ["b", None, "e", "d", "c", "a"]
    assert entry["id"] and with_values == [
        ("b", {"k": "b", "round": 2}), *((k, {"k": k, "round": 1}) for k in "edca")]
    assert mixed.status_code == 422 and "cursor" in mixed.json()["detail"]
