"""POST /v1/memories:batch over HTTP against a live server, on SQLite and PostgreSQL: each
operation answered on its own, exactly as the single request would answer it."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import func, select

from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, IdempotentResponse, MemoryPointer, SubjectErasure
from control_plane.identity import authenticate
from control_plane.memories import shared
from control_plane.memories.batch import run_batch
from control_plane.memories.schemas import PointerOut
from tests.support.crypto import open_stored
from tests.support.service import Tenant


def _sha(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False,
                                     separators=(",", ":")).encode()).hexdigest()


def _batch(http: httpx.Client, *operations: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return http.post("/v1/memories:batch", json={"operations": list(operations)}, **kwargs)


def _set(scope: str, ref: str, key: str, value: Any, **meta: Any) -> dict[str, Any]:
    return {"op": "set", "scope": scope, "scope_ref": ref, "key": key, "value": value, **meta}


def _get(scope: str, ref: str, key: str) -> dict[str, Any]:
    return {"op": "get", "scope": scope, "scope_ref": ref, "key": key}


def _delete(scope: str, ref: str, key: str) -> dict[str, Any]:
    return {"op": "delete", "scope": scope, "scope_ref": ref, "key": key}


def _pointers(tenant: Tenant) -> list[MemoryPointer]:
    with tenant.stack.runtime.sessions() as session:
        return list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == tenant.id).order_by(MemoryPointer.key)))


def _audit(tenant: Tenant) -> list[tuple[str, bool]]:
    with tenant.stack.runtime.sessions() as session:
        rows = session.execute(select(AccessLog.operation, AccessLog.success).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation.in_(
                ["read", "write", "delete", "access_denied"])).order_by(AccessLog.seq))
        return sorted((r.operation, r.success) for r in rows)


def _without_volatile(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "pointer"}


def test_mixed_batch_answers_every_operation_in_request_order(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/agent/bot/plan", json={"value": {"v": 0}}).raise_for_status()
        answer = _batch(
            http,
            _set("user", "u1", "lang", "fr", tags=["lang"], importance=4),
            _set("conversation", "c1", "draft", {"text": "hi"}),
            _get("agent", "bot", "plan"),
            _delete("agent", "bot", "plan"),
            _get("user", "u1", "lang"),
            _get("user", "u1", "missing"),
            _delete("user", "u1", "missing"),
        )
        single = http.get("/v1/memories/user/u1/lang").json()

    assert answer.status_code == 200
    results = answer.json()["results"]
    assert [(r["index"], r["op"], r["status"]) for r in results] == [
        (0, "set", 200), (1, "set", 200), (2, "get", 200), (3, "delete", 204),
        (4, "get", 200), (5, "get", 404), (6, "delete", 404)]
    assert results[0]["pointer"] == single["pointer"]
    assert (results[0]["pointer"]["tags"], results[0]["pointer"]["importance"],
            results[0]["pointer"]["content_sha256"]) == (["lang"], 4, _sha("fr"))
    assert results[1]["pointer"]["memory_type"] == "conversation_history"
    assert results[2]["value"] == {"v": 0}
    assert results[3] == {"index": 3, "op": "delete", "status": 204}
    assert results[4]["value"] == "fr"
    assert results[4]["pointer"] == single["pointer"]
    assert results[5] == {"index": 5, "op": "get", "status": 404, "error": "not_found",
                          "detail": "no memory at user/u1 key=missing"}
    assert results[6] == {"index": 6, "op": "delete", "status": 404, "error": "not_found",
                          "detail": "no memory at user/u1 key=missing"}
    assert [p.key for p in _pointers(tenant)] == ["draft", "lang"]


def test_operations_on_one_address_apply_in_request_order(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = _batch(http, _set("user", "u1", "k", 1), _get("user", "u1", "k"),
                        _set("user", "u1", "k", 2), _get("user", "u1", "k"),
                        _delete("user", "u1", "k"), _get("user", "u1", "k"),
                        _set("user", "u1", "k", 3))
        final = http.get("/v1/memories/user/u1/k").json()

    results = answer.json()["results"]
    assert [r["status"] for r in results] == [200, 200, 200, 200, 204, 404, 200]
    assert [results[1]["value"], results[3]["value"]] == [1, 2]
    assert [results[0]["pointer"]["version"], results[2]["pointer"]["version"]] == [1, 2]
    assert results[6]["pointer"]["version"] == 1  # a new memory after the delete
    assert final["value"] == 3
    assert len(tenant.objects()) == 1


def test_bad_items_get_their_own_sentences_and_the_good_ones_land(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = _batch(
            http,
            _set("user", "u1", "ok", 1),
            {"op": "set", "scope": "user", "scope_ref": "u1", "key": "novalue"},
            {"op": "fly", "scope": "user", "scope_ref": "u1", "key": "k"},
            _set("planet", "p1", "k", 1),
            _set("user", "u1", "../escape", 1),
            _set("tenant", "t1", "k", 1),
            _set("user", "u1", "imp", 1, importance=9),
            {"op": "get", "scope": "user", "scope_ref": "u1", "key": "ok", "value": 2},
            {"op": "get", "scope": "user", "scope_ref": "u1", "key": "ok", "colour": "red"},
            _get("user", "u1", "ok"),
        )
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert [(r["status"], r.get("error")) for r in results] == [
        (200, None)] + [(422, "validation_error")] * 8 + [(200, None)]
    details = [r.get("detail") for r in results]
    assert details[1] == "value: this field is required for set"
    assert details[2] == "op: Input should be 'set', 'get' or 'delete'"
    assert details[3].startswith("scope: Input should be 'tenant', 'institutional'")
    assert "key" in details[4]
    assert details[5] == "tenant-wide memories use scope_ref '-'"
    assert details[6] == "importance: Input should be less than or equal to 5"
    assert details[7] == "get takes only op, scope, scope_ref and key; leave out value"
    assert details[8] == "colour: Extra inputs are not permitted"
    assert results[2]["op"] == "fly"
    assert results[9]["value"] == 1
    assert [p.key for p in _pointers(tenant)] == ["ok"]


def test_envelope_errors_and_more_than_1000_operations_are_422(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        too_many = _batch(http, *[_set("user", "u1", f"k{i}", i) for i in range(1001)])
        empty = _batch(http)
        not_list = http.post("/v1/memories:batch", json={"operations": "x"})
        not_objects = http.post("/v1/memories:batch", json={"operations": [1]})
    assert too_many.status_code == 422
    assert too_many.json()["detail"] == (
        "body.operations: List should have at most 1000 items after validation, not 1001")
    assert empty.status_code == 422
    assert not_list.status_code == 422
    assert not_objects.status_code == 422
    assert _pointers(tenant) == []


def test_the_colon_route_leaves_scope_routes_alone(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/user/batch/k", json={"value": 7}).raise_for_status()
        single = http.get("/v1/memories/user/batch/k")
        wrong_method = http.get("/v1/memories:batch")
    assert single.json()["value"] == 7
    assert wrong_method.status_code == 405


def test_roles_apply_per_item(tenant: Tenant) -> None:
    compliance = tenant.key("compliance")
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/user/u1/k", json={"value": 1}).raise_for_status()
    with tenant.stack.http(compliance) as http:
        answer = _batch(http, _get("user", "u1", "k"), _set("user", "u1", "k", 2),
                        _delete("user", "u1", "k"))
        single = http.put("/v1/memories/user/u1/k", json={"value": 2}).json()
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [200, 403, 403]
    assert _without_volatile(results[1]) == {"index": 1, "op": "set", "status": 403, **single}
    assert results[2]["detail"] == single["detail"]
    assert _pointers(tenant)[0].version == 1
    assert _audit(tenant).count(("access_denied", False)) == 3  # two items + the single PUT


def test_scoped_key_items_outside_its_scopes_answer_like_single_requests(
        tenant: Tenant) -> None:
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="bot", agent_id="bot", scopes=[
            {"scope": "user", "scope_ref": "u1"}]).api_key
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/user/u2/k", json={"value": "secret"}).raise_for_status()
    with tenant.stack.http(scoped) as http:
        answer = _batch(http, _set("user", "u1", "k", 1), _get("user", "u2", "k"),
                        _set("user", "u2", "k", 2), _delete("user", "u2", "k"),
                        _set("user", "u1", "other", 1, agent_id="someone-else"))
        single_get = http.get("/v1/memories/user/u2/k").json()
        single_put = http.put("/v1/memories/user/u2/k", json={"value": 2}).json()
    results = answer.json()["results"]
    # A read outside answers 404 as if missing; a write or delete says the key's scopes do
    # not include user/u2 (403), exactly as the single requests do.
    assert [r["status"] for r in results] == [200, 404, 403, 403, 403]
    assert results[0]["pointer"]["agent_id"] == "bot"
    assert _without_volatile(results[1]) == {"index": 1, "op": "get", "status": 404,
                                             **single_get}
    assert _without_volatile(results[2]) == {"index": 2, "op": "set", "status": 403,
                                             **single_put}
    assert single_put["detail"].startswith("this key's scopes do not include user/u2: ")
    assert results[3]["detail"] == single_put["detail"]
    assert results[4]["detail"] == ("this key writes as agent 'bot'; leave agent_id out or "
                                    "send that one")
    u2 = [p for p in _pointers(tenant) if p.scope_ref == "u2"]
    assert [(p.version, p.sync_status) for p in u2] == [(1, "synced")]


def test_another_tenants_addresses_are_not_touched(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    with tenant.stack.http(other.admin_key) as http:
        http.put("/v1/memories/user/u1/k", json={"value": "theirs"}).raise_for_status()
    with tenant.stack.http(tenant.admin_key) as http:
        answer = _batch(http, _get("user", "u1", "k"), _delete("user", "u1", "k"),
                        _set("user", "u1", "k", "mine"))
    with tenant.stack.http(other.admin_key) as http:
        theirs = http.get("/v1/memories/user/u1/k").json()
    assert [r["status"] for r in answer.json()["results"]] == [404, 404, 200]
    assert theirs["value"] == "theirs"
    assert theirs["pointer"]["version"] == 1


def test_items_of_a_subject_being_erased_answer_409_and_others_land(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/user/u9/k", json={"value": 1}).raise_for_status()
        with tenant.stack.runtime.sessions() as session:
            session.add(SubjectErasure(tenant_id=tenant.id, user_id="u9", job_id=uuid.uuid4()))
            session.commit()
        try:
            answer = _batch(http, _set("user", "u9", "k", 2), _delete("user", "u9", "k"),
                            _set("agent", "bot", "k", 3, user_id="u9"),
                            _set("agent", "bot", "free", 4), _get("user", "u9", "k"))
        finally:
            with tenant.stack.runtime.sessions() as session:
                session.execute(SubjectErasure.__table__.delete().where(
                    SubjectErasure.tenant_id == tenant.id))
                session.commit()
    results = answer.json()["results"]
    assert [(r["status"], r.get("error")) for r in results] == [
        (409, "subject_erasure_in_progress")] * 3 + [(200, None), (200, None)]
    assert [(p.key, p.scope_ref, p.version) for p in _pointers(tenant)] == [
        ("free", "bot", 1), ("k", "u9", 1)]


def test_every_item_is_audited_as_a_single_request(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _batch(http, _set("user", "u1", "a", 1), _set("user", "u1", "b", 2),
               _get("user", "u1", "a"), _get("user", "u1", "nope"),
               _delete("user", "u1", "b")).raise_for_status()
        verified = http.get("/v1/audit/verify").json()
    assert _audit(tenant) == sorted([("write", True), ("write", True), ("read", True),
                                     ("read", False), ("delete", True)])
    assert verified["ok"] is True


def test_a_batch_of_one_operation_answers_and_audits_as_its_single_request(
        tenant: Tenant) -> None:
    volatile = {"id", "created_at", "updated_at", "storage_path", "version"}
    with tenant.stack.http(tenant.admin_key) as http:
        single_put = http.put("/v1/memories/user/u1/one", json={"value": {"n": 1},
                                                                 "tags": ["t"]}).json()
        (batch_set,) = _batch(http, _set("user", "u1", "two", {"n": 1},
                                         tags=["t"])).json()["results"]
        single_get = http.get("/v1/memories/user/u1/one").json()
        (batch_get,) = _batch(http, _get("user", "u1", "two")).json()["results"]
        (missing,) = _batch(http, _get("user", "u1", "nope")).json()["results"]
        single_missing = http.get("/v1/memories/user/u1/nope").json()
        (deleted,) = _batch(http, _delete("user", "u1", "two")).json()["results"]
        verified = http.get("/v1/audit/verify").json()
    assert batch_set["status"] == 200
    assert ({k: v for k, v in batch_set["pointer"].items() if k not in volatile}
            == {k: v for k, v in single_put.items() if k not in volatile} | {"key": "two"})
    assert (batch_get["status"], batch_get["value"]) == (200, single_get["value"])
    assert batch_get["pointer"] == batch_set["pointer"]
    assert (missing["status"], missing["error"], missing["detail"]) == (
        404, single_missing["error"], single_missing["detail"])
    assert deleted == {"index": 0, "op": "delete", "status": 204}
    assert [(p.key, p.version) for p in _pointers(tenant)] == [("one", 1)]
    assert _audit(tenant) == sorted([("write", True), ("write", True), ("read", True),
                                     ("read", True), ("read", False), ("read", False),
                                     ("delete", True)])
    assert verified["ok"] is True


def test_idempotent_batch_replays_its_first_answer(tenant: Tenant) -> None:
    ops = [_set("user", "u1", "a", 1), _delete("user", "u1", "gone"), _get("user", "u1", "a"),
           _set("user", "u1", "b", {"x": 1}, user_id="u1")]
    with tenant.stack.http(tenant.admin_key) as http:
        http.put("/v1/memories/user/u1/gone", json={"value": 0}).raise_for_status()
        first = _batch(http, *ops, headers={"Idempotency-Key": "batch-1"})
        again = _batch(http, *ops, headers={"Idempotency-Key": "batch-1"})
        other = _batch(http, _set("user", "u1", "a", 9), headers={"Idempotency-Key": "batch-1"})
        single = http.put("/v1/memories/user/u1/a", json={"value": 9},
                          headers={"Idempotency-Key": "batch-1"})
    assert first.status_code == again.status_code == 200
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert [r["status"] for r in first.json()["results"]] == [200, 204, 200, 200]
    assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused")
    assert (single.status_code, single.json()["error"]) == (422, "idempotency_key_reused")
    assert [(p.key, p.version) for p in _pointers(tenant)] == [("a", 1), ("b", 1)]
    with tenant.stack.runtime.sessions() as session:
        stored = session.scalars(select(IdempotentResponse.response).where(
            IdempotentResponse.tenant_id == tenant.id)).all()
    assert len(stored) == 4  # the batch's record, two sets, one delete; never the get
    assert sorted(sorted(r) for r in stored) == sorted(
        [["batch"], [], sorted(PointerOut.model_fields), sorted(PointerOut.model_fields)])


def test_after_a_batch_every_pointer_names_an_object_that_verifies(tenant: Tenant) -> None:
    values = {f"k{i:03d}": {"i": i, "pad": "x" * 1024} for i in range(150)}
    with tenant.stack.http(tenant.admin_key) as http:
        answer = _batch(http, *[_set("team", f"t{i % 3}", k, v)
                                for i, (k, v) in enumerate(values.items())])
        reads = _batch(http, *[_get("team", f"t{i % 3}", k) for i, k in enumerate(values)])
    assert [r["status"] for r in answer.json()["results"]] == [200] * 150
    assert [r["value"] for r in reads.json()["results"]] == list(values.values())
    pointers = _pointers(tenant)
    assert len(pointers) == 150
    assert len(tenant.objects()) == 150
    for pointer in pointers:
        blob = (tenant.stack.bucket_root / pointer.storage_path).read_bytes()
        plain = open_stored(tenant.stack.runtime, tenant.id, pointer.storage_path, pointer.id,
                            blob)
        assert (pointer.sync_status, hashlib.sha256(plain).hexdigest()) == (
            "synced", pointer.content_sha256)
        assert json.loads(plain) == values[pointer.key]
    with tenant.stack.runtime.sessions() as session:
        writes = session.scalar(select(func.count()).select_from(AccessLog).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "write"))
    assert writes == 150


def test_a_get_whose_object_was_tampered_answers_hash_mismatch_alone(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _batch(http, _set("user", "u1", "a", 1), _set("user", "u1", "b", 2)).raise_for_status()
        (bad,) = [p for p in _pointers(tenant) if p.key == "b"]
        (tenant.stack.bucket_root / bad.storage_path).write_bytes(b"not what was stored")
        answer = _batch(http, _get("user", "u1", "a"), _get("user", "u1", "b"))
    results = answer.json()["results"]
    assert results[0]["value"] == 1
    assert {k: results[1][k] for k in ("index", "op", "status", "error", "pointer_id",
                                       "expected_sha256", "actual_sha256", "reason")} == {
        "index": 1, "op": "get", "status": 409, "error": "hash_mismatch",
        "pointer_id": str(bad.id), "expected_sha256": bad.content_sha256,
        "actual_sha256": None, "reason": "undecryptable"}
    assert "value" not in results[1]
    assert [(p.key, p.sync_status) for p in _pointers(tenant)] == [
        ("a", "synced"), ("b", "corrupt")]
    assert _audit(tenant) == sorted([("write", True), ("write", True), ("read", True),
                                     ("read", False)])


def test_gets_a_fast_read_cannot_serve_answer_as_single_reads(tenant: Tenant) -> None:
    # Missing, expired and corrupt-marked pointers leave the batch's shared read for the
    # single read, which answers 404, 404 and (the object being intact) 200 + re-marks it.
    with tenant.stack.http(tenant.admin_key) as http:
        _batch(http, *[_set("user", "u1", k, k) for k in ("live", "old", "marked")]
               ).raise_for_status()
        with tenant.stack.runtime.sessions() as session:
            # A write transaction from its first read: on SQLite a read transaction that
            # later writes fails at once if the server's sealer committed meanwhile.
            begin_write(session)
            pointers = {p.key: p for p in session.scalars(select(MemoryPointer).where(
                MemoryPointer.tenant_id == tenant.id))}
            pointers["old"].expires_at = datetime(2020, 1, 1, tzinfo=UTC)
            pointers["marked"].sync_status = "corrupt"
            session.commit()
        answer = _batch(http, _get("user", "u1", "live"), _get("user", "u1", "old"),
                        _get("user", "u1", "marked"), _get("user", "u1", "none"))
    results = answer.json()["results"]
    assert [(r["status"], r.get("value"), r.get("error")) for r in results] == [
        (200, "live", None), (404, None, "not_found"), (200, "marked", None),
        (404, None, "not_found")]
    assert results[1]["detail"] == "the memory at user/u1 key=old has expired"
    assert {p.key: p.sync_status for p in _pointers(tenant)} == {
        "live": "synced", "old": "synced", "marked": "synced"}
    with tenant.stack.runtime.sessions() as session:
        reads = session.execute(select(AccessLog.pointer_id, AccessLog.success,
                                       AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "read")).all()
    ids = {p.key: p.id for p in _pointers(tenant)}
    assert sorted((r.pointer_id == ids.get("live"), r.pointer_id == ids.get("marked"),
                   r.success) for r in reads) == sorted(
        [(True, False, True), (False, True, True), (False, False, False),
         (False, False, False)])
    # Each success row names its address sealed under the subject's key, as a lone read's.
    assert all(r.detail.startswith("user sealed:") for r in reads if r.success)


def test_gets_whose_audit_rows_cannot_be_committed_serve_no_value(
        tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        _batch(http, _set("user", "u1", "a", 1), _set("user", "u1", "b", 2)).raise_for_status()
    runtime = tenant.stack.runtime

    def down(*args: Any, **kwargs: Any) -> None:
        raise sa_exc.OperationalError("INSERT", {}, Exception("server closed the connection"))

    assert runtime.plane.audit_batcher is not None
    monkeypatch.setattr(runtime.plane.audit_batcher, "record_many", down)
    # No subject key remembered: a get whose key the server remembers (the sets remember it
    # when the subject's key already exists as they run, which depends on their timing)
    # writes its read row in its own lookup statement on PostgreSQL and needs no batcher.
    monkeypatch.setattr(shared, "_KEYS", {})
    with runtime.sessions() as session:
        caller = authenticate(session, f"Bearer {tenant.admin_key}")
        answer = run_batch(runtime.sessions, session, runtime.plane, caller,
                           [_get("user", "u1", "a"), _get("user", "u1", "b")], None)
    assert answer.results == [
        {"index": i, "op": "get", "status": 503, "error": "database_unavailable",
         "detail": "the control-plane database is unreachable; retry later"} for i in (0, 1)]
