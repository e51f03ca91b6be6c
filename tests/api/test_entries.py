"""Entries by id (``/v1/entries``) against a live server, on SQLite and PostgreSQL: the write,
read, replace and delete protocols, the filters, search through the blind index, roles,
scoped keys, idempotency, the erasure guard and the audit trail."""

from __future__ import annotations

import hashlib
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from control_plane.db.models import (
    AccessLog,
    EntryTerm,
    IdempotentResponse,
    MemoryPointer,
    SubjectErasure,
)
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support.crypto import open_stored, tampered
from tests.support.service import Tenant


def _sha(value: object) -> str:
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()


def _entry(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"scope": "entity", "scope_ref": "ent_acme", "title": "Acme call",
                            "summary": "Acme agreed a **ROAS target of 4** for Q3."}
    return body | fields


def _post(http: httpx.Client, **fields: Any) -> dict[str, Any]:
    answer = http.post("/v1/entries", json=_entry(**fields))
    assert answer.status_code == 201, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _ids(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["items"]]


def _terms(tenant: Tenant, entry_id: str) -> list[str]:
    with tenant.stack.engine.connect() as conn:
        return list(conn.scalars(select(EntryTerm.term)
                                 .where(EntryTerm.pointer_id == uuid.UUID(entry_id))))


def _pointer(tenant: Tenant, entry_id: str) -> Any:
    with tenant.stack.engine.connect() as conn:
        return conn.execute(select(MemoryPointer)
                            .where(MemoryPointer.id == uuid.UUID(entry_id))).first()


def test_create_then_get_round_trips_summary_and_metadata(tenant: Tenant) -> None:
    summary = "Acme agreed a **ROAS target of 4** for Q3.\n\n- budget: $40k"
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http, summary=summary, tags=["decision", "q3"], importance=5,
                        source="call", agent_id="jet")
        read = http.get(f"/v1/entries/{created['id']}")

    assert read.status_code == 200
    assert read.json() == created
    assert created["summary"] == summary
    assert (created["scope"], created["scope_ref"], created["key"]) == ("entity", "ent_acme",
                                                                       None)
    assert (created["memory_type"], created["title"], created["tags"]) == (
        "entry", "Acme call", ["decision", "q3"])
    assert (created["importance"], created["source"], created["agent_id"]) == (5, "call", "jet")
    assert (created["sync_status"], created["version"]) == ("synced", 1)
    assert created["content_sha256"] == _sha(summary)
    assert "/@entries/" in created["storage_path"]
    (stored,) = tenant.objects()
    assert stored.as_posix().endswith(created["storage_path"])
    assert b"ROAS" not in stored.read_bytes()  # encrypted at rest
    assert open_stored(tenant.stack.runtime, tenant.id, created["storage_path"],
                       uuid.UUID(created["id"]), stored.read_bytes()) == json.dumps(
        summary, ensure_ascii=False, separators=(",", ":")).encode()


def test_defaults_and_a_user_scope_names_the_subject(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http, scope="user", scope_ref="u-7")
        tenant_wide = _post(http, scope="institutional", scope_ref="-")
    assert (created["importance"], created["source"], created["tags"]) == (3, "api", [])
    assert created["user_id"] == "u-7"
    assert tenant_wide["scope"] == "tenant"


def test_bad_input_is_refused_with_a_sentence_and_writes_nothing(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        compactor = http.post("/v1/entries", json=_entry(source="compactor"))
        importance = http.post("/v1/entries", json=_entry(importance=6))
        missing = http.post("/v1/entries", json={"scope": "entity", "scope_ref": "x",
                                                 "title": "t"})
        traversal = http.post("/v1/entries", json=_entry(scope_ref=".."))
        tenant_ref = http.post("/v1/entries", json=_entry(scope="tenant", scope_ref="x"))
        nul = http.post("/v1/entries", json=_entry(summary="a\x00b"))
        empty_search = http.get("/v1/entries", params={"search": "?!"})
        not_an_id = http.get("/v1/entries/not-a-uuid")

    assert compactor.status_code == 422
    assert compactor.json()["detail"] == (
        "body.source: Value error, source 'compactor' is reserved for the compactor's own "
        "entries; send chat, call, email, manual or api")
    assert importance.status_code == 422
    assert "importance" in importance.json()["detail"]
    assert missing.status_code == 422
    assert missing.json()["detail"] == "body.summary: this field is required"
    assert traversal.json() == {"error": "validation_error",
                                "detail": "scope_ref must not contain '.' or '..' path segments"}
    assert tenant_ref.json() == {"error": "validation_error",
                                 "detail": "tenant-wide memories use scope_ref '-'"}
    assert nul.status_code == 422
    assert empty_search.status_code == 422
    assert empty_search.json()["detail"] == (
        "search must contain at least one word (letters or digits)")
    assert not_an_id.status_code == 422
    assert tenant.objects() == []
    with tenant.stack.engine.connect() as conn:
        assert conn.scalar(select(MemoryPointer.id)
                           .where(MemoryPointer.tenant_id == tenant.id)) is None


def test_put_writes_a_new_version_and_rewrites_the_search_words(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http, tags=["decision"], importance=4, source="call")
        before = sorted(_terms(tenant, created["id"]))
        replaced = http.put(f"/v1/entries/{created['id']}", json={
            "title": "Acme renewal", "summary": "Renewal signed; budget doubled.",
            "tags": ["renewal"], "source": "email"})
        roas = _ids(http.get("/v1/entries", params={"search": "roas"}))
        budget = http.get("/v1/entries", params={"search": "BUDGET renewal"})
        read = http.get(f"/v1/entries/{created['id']}").json()

    assert replaced.status_code == 200, replaced.text
    body = replaced.json()
    assert (body["id"], body["version"]) == (created["id"], 2)
    assert (body["title"], body["tags"], body["importance"], body["source"]) == (
        "Acme renewal", ["renewal"], 3, "email")
    assert body["storage_path"] != created["storage_path"]
    assert read["summary"] == "Renewal signed; budget doubled."
    assert roas == []
    assert [i["id"] for i in budget.json()["items"]] == [created["id"]]
    assert budget.json()["items"][0]["summary"] == "Renewal signed; budget doubled."
    # acme, renewal, signed, budget, doubled
    assert len(_terms(tenant, created["id"])) == 5
    assert sorted(_terms(tenant, created["id"])) != before
    (stored,) = tenant.objects()  # the superseded object was deleted
    assert stored.as_posix().endswith(body["storage_path"])


def test_delete_removes_pointer_object_and_terms(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http)
        kept = _post(http, title="Other", summary="Unrelated roas note")
        assert _terms(tenant, created["id"]) != []
        deleted = http.delete(f"/v1/entries/{created['id']}")
        again = http.delete(f"/v1/entries/{created['id']}")
        read = http.get(f"/v1/entries/{created['id']}")
        found = _ids(http.get("/v1/entries", params={"search": "roas"}))

    assert deleted.status_code == 204
    assert again.status_code == 404
    assert read.json() == {"error": "not_found", "detail": f"no entry {created['id']}"}
    assert _pointer(tenant, created["id"]) is None
    assert _terms(tenant, created["id"]) == []
    assert found == [kept["id"]]
    assert [p.as_posix().endswith(kept["storage_path"]) for p in tenant.objects()] == [True]


def test_list_filters_in_sql_and_pages(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        a = _post(http, tags=["decision"], importance=5,
                  summary="The ROAS target is 4; Café budget approved.")
        b = _post(http, tags=["decision", "q3"], importance=2, summary="ROAS dipped in June.")
        c = _post(http, scope_ref="ent_other", tags=["q3"], importance=4,
                  summary="Budget frozen until ROAS recovers.")
        http.put("/v1/memories/entity/ent_acme/plain", json={"value": 1, "tags": ["decision"]})

        everything = http.get("/v1/entries").json()
        by_scope = _ids(http.get("/v1/entries", params={"scope": "entity",
                                                        "scope_ref": "ent_acme"}))
        by_tag = _ids(http.get("/v1/entries", params={"tag": "decision"}))
        by_importance = _ids(http.get("/v1/entries", params={"min_importance": 4}))
        both_words = _ids(http.get("/v1/entries", params={"search": "roas, BUDGET"}))
        folded = _ids(http.get("/v1/entries", params={"search": "CAFÉ"}))
        combined = _ids(http.get("/v1/entries", params={"search": "roas", "tag": "q3",
                                                        "min_importance": 3}))
        first = http.get("/v1/entries", params={"limit": 2}).json()
        second = http.get("/v1/entries", params={"limit": 2, "cursor": first["next_cursor"]})
        with_summary = http.get("/v1/entries", params={"tag": "q3",
                                                       "include_summary": "true"}).json()
        bad_importance = http.get("/v1/entries", params={"min_importance": 0})

    ids = sorted([a["id"], b["id"], c["id"]])
    assert [i["id"] for i in everything["items"]] == ids  # the keyed memory is not an entry
    assert [i["summary"] for i in everything["items"]] == [None, None, None]
    assert everything["next_cursor"] is None
    assert by_scope == sorted([a["id"], b["id"]])
    assert by_tag == sorted([a["id"], b["id"]])
    assert by_importance == sorted([a["id"], c["id"]])
    assert both_words == sorted([a["id"], c["id"]])
    assert folded == [a["id"]]
    assert combined == [c["id"]]
    assert [i["id"] for i in first["items"]] + _ids(second) == ids
    assert second.json()["next_cursor"] is None
    assert {i["id"]: i["summary"] for i in with_summary["items"]} == {
        b["id"]: "ROAS dipped in June.", c["id"]: "Budget frozen until ROAS recovers."}
    assert bad_importance.status_code == 422


def test_search_index_holds_no_plaintext(tenant: Tenant) -> None:
    marker = f"zebra{uuid.uuid4().hex[:12]}"
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http, title="Plain title", summary=f"The {marker} decision.")
        found = _ids(http.get("/v1/entries", params={"search": marker.upper()}))
    assert found == [created["id"]]
    terms = _terms(tenant, created["id"])
    assert len(terms) == 5  # plain, title, the, <marker>, decision
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in terms)
    assert marker not in _database_text(tenant)
    # The same word under another tenant's key is another term: nothing compares across.
    other = tenant.stack.new_tenant()
    with tenant.stack.http(other.admin_key) as http:
        theirs = _post(http, title="Plain title", summary=f"The {marker} decision.")
    assert set(_terms(other, theirs["id"])).isdisjoint(terms)


def test_roles_other_tenants_and_audit(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    compliance = tenant.key("compliance")
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http)
        http.get(f"/v1/entries/{created['id']}")
        http.get("/v1/entries", params={"search": "roas"})
    with tenant.stack.http(compliance) as http:
        read = http.get(f"/v1/entries/{created['id']}")
        write = http.post("/v1/entries", json=_entry())
        delete = http.delete(f"/v1/entries/{created['id']}")
    with tenant.stack.http(other.admin_key) as http:
        foreign = [http.get(f"/v1/entries/{created['id']}"),
                   http.put(f"/v1/entries/{created['id']}", json={"title": "x", "summary": "y"}),
                   http.delete(f"/v1/entries/{created['id']}")]
        foreign_list = _ids(http.get("/v1/entries"))

    assert read.status_code == 200
    assert (write.status_code, delete.status_code) == (403, 403)
    assert [(r.status_code, r.json()["detail"]) for r in foreign] == [
        (404, f"no entry {created['id']}")] * 3
    assert foreign_list == []
    assert _pointer(tenant, created["id"]).version == 1
    with tenant.stack.engine.connect() as conn:
        rows = conn.execute(select(AccessLog.operation, AccessLog.success, AccessLog.detail)
                            .where(AccessLog.tenant_id == tenant.id,
                                   AccessLog.pointer_id == uuid.UUID(created["id"]))
                            .order_by(AccessLog.id)).all()
        searches = conn.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "search")).all()
    assert [(op, ok) for op, ok, _ in rows] == [("write", True), ("read", True),
                                                ("read", True), ("read", True)]
    assert rows[0][2].startswith("entity entry v1 ")
    assert "ent_acme" not in rows[0][2]  # the address is sealed, never in clear
    assert searches == ["entries scope=None ref=None tag=None words=1 min_importance=None "
                        "-> 1"]


def test_scoped_key_sees_and_writes_only_its_scopes(tenant: Tenant) -> None:
    with tenant.client() as admin:
        key = admin.keys.create(role="agent", name="bot", agent_id="bot",
                                scopes=[{"scope": "entity", "scope_ref": "ent_acme"}]).api_key
    with tenant.stack.http(tenant.admin_key) as http:
        outside = _post(http, scope_ref="ent_other")
    with tenant.stack.http(key) as http:
        inside = _post(http)
        refused = http.post("/v1/entries", json=_entry(scope_ref="ent_other"))
        other_agent = http.post("/v1/entries", json=_entry(agent_id="someone-else"))
        hidden = [http.get(f"/v1/entries/{outside['id']}"),
                  http.put(f"/v1/entries/{outside['id']}", json={"title": "x", "summary": "y"}),
                  http.delete(f"/v1/entries/{outside['id']}")]
        missing = http.get(f"/v1/entries/{uuid.uuid4()}")
        listed = _ids(http.get("/v1/entries"))
        searched = _ids(http.get("/v1/entries", params={"search": "roas"}))

    assert inside["agent_id"] == "bot"
    assert (refused.status_code, refused.json()) == (403, {"error": "forbidden", "detail": (
        "this key's scopes do not include entity/ent_other: write there with a key whose "
        "scopes list it (an admin sets a key's scopes when creating it)")})
    assert other_agent.status_code == 403
    assert [r.json() for r in hidden] == [
        {"error": "not_found", "detail": f"no entry {outside['id']}"}] * 3
    assert missing.status_code == 404
    assert listed == [inside["id"]]
    assert searched == [inside["id"]]
    assert _pointer(tenant, outside["id"]).version == 1


def test_idempotent_create_replays_the_first_answer(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        headers = {"Idempotency-Key": "entry-1"}
        first = http.post("/v1/entries", json=_entry(), headers=headers)
        second = http.post("/v1/entries", json=_entry(), headers=headers)
        reused = http.post("/v1/entries", json=_entry(title="Other"), headers=headers)

    assert (first.status_code, second.status_code) == (201, 201)
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert reused.status_code == 422
    assert len(tenant.objects()) == 1
    with tenant.stack.engine.connect() as conn:
        answer = conn.scalar(select(IdempotentResponse.response)
                             .where(IdempotentResponse.tenant_id == tenant.id))
    assert answer["summary"] is None  # the first answer is kept without the summary (I7)


def test_writes_for_a_subject_being_erased_answer_409(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http, user_id="u-9")
        with tenant.stack.runtime.sessions() as session:
            session.add(SubjectErasure(tenant_id=tenant.id, user_id="u-9", job_id=uuid.uuid4()))
            session.commit()
        try:
            blocked = [http.post("/v1/entries", json=_entry(user_id="u-9")),
                       http.post("/v1/entries", json=_entry(scope="user", scope_ref="u-9")),
                       http.put(f"/v1/entries/{created['id']}",
                                json={"title": "x", "summary": "y"}),
                       http.delete(f"/v1/entries/{created['id']}")]
            read = http.get(f"/v1/entries/{created['id']}")
        finally:
            with tenant.stack.runtime.sessions() as session:
                session.execute(SubjectErasure.__table__.delete().where(
                    SubjectErasure.tenant_id == tenant.id))
                session.commit()

    assert [(r.status_code, r.json()["error"]) for r in blocked] == [
        (409, "subject_erasure_in_progress")] * 4
    assert read.status_code == 200
    assert len(tenant.objects()) == 1
    assert _pointer(tenant, created["id"]).version == 1


def test_erasure_deletes_the_subjects_entries_and_their_terms(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        mine = [_post(http, user_id="u-erase"), _post(http, scope="user", scope_ref="u-erase")]
        theirs = _post(http, user_id="u-keep")
    with tenant.client() as officer:
        done = officer.jobs.wait(officer.memory.erase_user("u-erase").id)
    assert done.state == "completed"
    with tenant.stack.http(tenant.admin_key) as http:
        assert _ids(http.get("/v1/entries", params={"search": "roas"})) == [theirs["id"]]
        assert [http.get(f"/v1/entries/{e['id']}").status_code for e in mine] == [404, 404]
    assert [_terms(tenant, e["id"]) for e in mine] == [[], []]
    assert len(_terms(tenant, theirs["id"])) == 10
    assert [p.as_posix().endswith(theirs["storage_path"]) for p in tenant.objects()] == [True]


def test_export_of_the_subject_includes_its_entries_verified(tenant: Tenant,
                                                              tmp_path: Path) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        mine = _post(http, user_id="u-export", summary="Ana prefers **email**.")
        _post(http, user_id="u-other")
    with tenant.client() as officer:
        job = officer.memory.export(user_id="u-export")
        assert officer.jobs.wait(job.id).state == "completed"
        officer.exports.download(job.id, tmp_path / "export.zip")
    with zipfile.ZipFile(tmp_path / "export.zip") as archive:
        manifest = json.loads(archive.read("manifest.json"))
        (item,) = manifest["items"]
        data = archive.read(item["file"])
    assert (item["pointer_id"], item["key"], item["memory_type"]) == (mine["id"], None, "entry")
    assert item["hash_verified"] is True
    assert json.loads(data) == "Ana prefers **email**."


def test_a_tampered_summary_is_never_served(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        created = _post(http)
        (stored,) = tenant.objects()
        stored.write_bytes(tampered(stored.read_bytes()))
        read = http.get(f"/v1/entries/{created['id']}")
        listed = http.get("/v1/entries", params={"search": "roas"}).json()["items"]

    assert read.status_code == 409
    assert (read.json()["error"], read.json()["pointer_id"]) == ("hash_mismatch",
                                                                 created["id"])
    assert [(i["id"], i["summary"], i["sync_status"]) for i in listed] == [
        (created["id"], None, "corrupt")]
    assert _pointer(tenant, created["id"]).sync_status == "corrupt"


def test_a_listing_that_meets_a_tampered_summary_first_serves_the_others(
        tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        good = _post(http, summary="Ana prefers email.")
        bad = _post(http, summary="Ana prefers phone calls.")
        with tenant.stack.engine.connect() as conn:
            path = conn.scalar(select(MemoryPointer.storage_path).where(
                MemoryPointer.id == uuid.UUID(bad["id"])))
        stored = tenant.bucket_dir / path.split(f"tenants/{tenant.id}/", 1)[1]
        stored.write_bytes(tampered(stored.read_bytes()))
        listed = http.get("/v1/entries", params={"include_summary": "true"})
    assert listed.status_code == 200, listed.text
    assert {i["id"]: i["summary"] for i in listed.json()["items"]} == {
        good["id"]: "Ana prefers email.", bad["id"]: None}
    assert "phone" not in listed.text
    assert _pointer(tenant, bad["id"]).sync_status == "corrupt"
    assert _pointer(tenant, good["id"]).sync_status == "synced"
    with tenant.stack.engine.connect() as conn:
        failures = conn.execute(select(AccessLog.pointer_id).where(
            AccessLog.tenant_id == tenant.id, AccessLog.success.is_(False))).scalars().all()
    assert [str(f) for f in failures] == [bad["id"]]
