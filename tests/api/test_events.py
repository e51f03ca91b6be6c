"""Raw events through the HTTP API against a live server, on SQLite and PostgreSQL:
append (201, object first, encrypted, time-sharded), read with a verified body, list with
filters and a stable cursor, idempotency, roles, scoped keys, tenant isolation, I3 and the
write block of an erasure."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from control_plane.db.models import AccessLog, Job, MemoryEvent, SubjectErasure
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support.crypto import open_stored
from tests.support.service import Tenant

BODY = "## Call with Acme\n- Agreed: ROAS target raised to 4.\n- Next call in two weeks."


def _sha(body: str) -> str:
    return hashlib.sha256(json.dumps(body, ensure_ascii=False,
                                     separators=(",", ":")).encode()).hexdigest()


def _event(**overrides: Any) -> dict[str, Any]:
    return {"scope": "entity", "scope_ref": "ent_acme", "kind": "call_summary", "body": BODY,
            "source": "call", "source_ref": "call-1", **overrides}


def _post(tenant: Tenant, body: dict[str, Any], key: str | None = None,
          headers: dict[str, str] | None = None) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.post("/v1/events", json=body, headers=headers or {})


def _rows(tenant: Tenant) -> list[MemoryEvent]:
    with Session(tenant.stack.engine) as session:
        return list(session.scalars(select(MemoryEvent).where(
            MemoryEvent.tenant_id == tenant.id).order_by(MemoryEvent.occurred_at)))


def test_append_stores_an_encrypted_body_under_a_time_sharded_path(tenant: Tenant) -> None:
    answer = _post(tenant, _event(occurred_at="2026-03-02T15:05:00+01:00", user_id="u-42",
                                  agent_id="jet"))
    assert answer.status_code == 201, answer.text
    event = answer.json()
    assert set(event) == {"id", "scope", "scope_ref", "kind", "source", "source_ref",
                          "user_id", "agent_id", "occurred_at", "compressed_at",
                          "storage_path", "content_sha256", "content_size", "sync_status",
                          "created_at", "storage_class"}
    assert (event["scope"], event["scope_ref"], event["kind"]) == ("entity", "ent_acme",
                                                                   "call_summary")
    assert (event["source"], event["source_ref"]) == ("call", "call-1")
    assert (event["user_id"], event["agent_id"]) == ("u-42", "jet")
    assert event["occurred_at"] == "2026-03-02T14:05:00Z"
    assert event["compressed_at"] is None
    assert event["sync_status"] == "synced"
    assert event["content_sha256"] == _sha(BODY)
    assert event["storage_path"] == (
        f"tenants/{tenant.id}/events/entity/ent_acme/2026/03/{event['id']}.json")
    [stored] = tenant.objects()
    assert stored.as_posix().endswith(event["storage_path"])
    blob = stored.read_bytes()
    assert b"ROAS" not in blob  # encrypted at rest
    assert open_stored(tenant.stack.runtime, tenant.id, event["storage_path"],
                       uuid.UUID(event["id"]), blob) == json.dumps(BODY).encode()

    with tenant.stack.http(tenant.admin_key) as http:
        read = http.get(f"/v1/events/{event['id']}")
    assert read.status_code == 200
    assert read.json() == {**event, "body": BODY}


def test_append_audits_with_the_event_id_and_no_body(tenant: Tenant) -> None:
    event = _post(tenant, _event(body="secret ROAS figure 4.2")).json()
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get(f"/v1/events/{event['id']}").status_code == 200
    with Session(tenant.stack.engine) as session:
        rows = session.execute(select(AccessLog.operation, AccessLog.success,
                                      AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id,
            AccessLog.event_id == uuid.UUID(event["id"])).order_by(AccessLog.id)).all()
    assert [(op, ok) for op, ok, _ in rows] == [("write", True), ("read", True)]
    assert rows[0][2].startswith("event entity call_summary 24 bytes")
    assert all("ROAS" not in detail and "ent_acme" not in detail for _, _, detail in rows)


@pytest.mark.parametrize(("scope", "ref", "stored"), [
    ("institutional", "-", "tenant"), ("tenant", "-", "tenant"), ("entity", "ent_1", "entity"),
    ("project", "p1", "project"), ("team", "T1", "team"), ("agent", "bot", "agent"),
    ("user", "u1", "user"), ("conversation", "c1", "conversation"), ("app", "a1", "app")])
def test_every_scope_is_accepted(tenant: Tenant, scope: str, ref: str, stored: str) -> None:
    answer = _post(tenant, _event(scope=scope, scope_ref=ref, kind="decision"))
    assert answer.status_code == 201, answer.text
    assert (answer.json()["scope"], answer.json()["scope_ref"]) == (stored, ref)
    assert f"/events/{stored}/{ref}/" in answer.json()["storage_path"]
    # an event in a user's scope names that user as its data subject
    assert answer.json()["user_id"] == ("u1" if scope == "user" else None)


def test_occurred_at_defaults_to_now(tenant: Tenant) -> None:
    before = datetime.now(UTC)
    event = _post(tenant, _event()).json()
    after = datetime.now(UTC)
    occurred = datetime.fromisoformat(event["occurred_at"])
    assert before.replace(microsecond=0) <= occurred <= after
    assert f"/{occurred.year:04d}/{occurred.month:02d}/" in event["storage_path"]


BAD = [
    ("upper-case kind", _event(kind="CallSummary"), 422, "body.kind"),
    ("kind with a dash", _event(kind="call-summary"), 422, "body.kind"),
    ("empty body", _event(body=""), 422, "body.body"),
    ("blank body", _event(body="  \n "), 422, "body must not be empty or blank"),
    ("no kind", {k: v for k, v in _event().items() if k != "kind"}, 422, "body.kind"),
    ("unknown field", _event(colour="red"), 422, "body.colour"),
    ("naive occurred_at", _event(occurred_at="2026-03-02T14:05:00"), 422, "body.occurred_at"),
    ("tenant ref", _event(scope="institutional", scope_ref="acme"), 422, "scope_ref '-'"),
    ("unknown scope", _event(scope="galaxy"), 422, "body.scope"),
    ("occurred_at past year 9999 in UTC", _event(occurred_at="9999-12-31T23:00:00-05:00"),
     422, "out of range once converted to UTC"),
    ("traversal ref", _event(scope_ref=".."), 422, "'..' path segments"),
    ("NUL in source", _event(source="a\u0000b"), 422, "body.source"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_and_writes_nothing(tenant: Tenant, case: tuple) -> None:  # type: ignore[type-arg]
    _, body, status, phrase = case
    answer = _post(tenant, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] == "validation_error"
    assert phrase in answer.json()["detail"]
    assert _rows(tenant) == []
    assert tenant.objects() == []


def test_a_body_over_the_request_limit_is_413(tenant: Tenant) -> None:
    answer = _post(tenant, _event(body="x" * (11 * 1024 * 1024)))
    assert answer.status_code == 413
    assert answer.json()["error"] == "payload_too_large"
    assert _rows(tenant) == [] and tenant.objects() == []


def _append_at(tenant: Tenant, when: str, kind: str = "decision", **extra: Any) -> str:
    answer = _post(tenant, _event(kind=kind, occurred_at=when, **extra))
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _list(tenant: Tenant, key: str | None = None, **params: Any) -> Any:
    with tenant.stack.http(key or tenant.admin_key) as http:
        return http.get("/v1/events", params=params)


def test_list_filters_orders_and_pages_stably(tenant: Tenant) -> None:
    a = _append_at(tenant, "2026-01-05T10:00:00Z", "call_summary")
    b = _append_at(tenant, "2026-01-03T10:00:00Z", "decision")
    c = _append_at(tenant, "2026-02-01T10:00:00Z", "call_summary")
    d = _append_at(tenant, "2026-01-05T10:00:00Z", "decision")
    other = _append_at(tenant, "2026-01-04T10:00:00Z", scope_ref="ent_other")
    same_time = sorted([a, d])

    everything = _list(tenant, scope="entity", scope_ref="ent_acme").json()
    assert [e["id"] for e in everything["items"]] == [b, *same_time, c]
    assert everything["next_cursor"] is None
    assert [e["id"] for e in _list(tenant).json()["items"]] == [b, other, *same_time, c]
    assert [e["id"] for e in _list(tenant, scope="entity", scope_ref="ent_acme",
                                   kind="call_summary").json()["items"]] == [a, c]
    assert [e["id"] for e in _list(tenant, since="2026-01-05T10:00:00Z",
                                   until="2026-02-01T10:00:00Z").json()["items"]] == same_time
    assert "body" not in everything["items"][0]

    seen: list[str] = []
    cursor = None
    while True:
        page = _list(tenant, limit=2, **({"cursor": cursor} if cursor else {})).json()
        seen += [e["id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        if len(seen) == 2:
            # an event appended meanwhile before the cursor does not shift the later pages
            _append_at(tenant, "2025-12-01T00:00:00Z", kind="late")
    assert seen == [b, other, *same_time, c]


def test_compressed_events_are_listed_only_when_asked(tenant: Tenant) -> None:
    old = _append_at(tenant, "2025-01-01T00:00:00Z")
    new = _append_at(tenant, "2026-01-01T00:00:00Z")
    with Session(tenant.stack.engine) as session:
        session.execute(update(MemoryEvent).where(MemoryEvent.id == uuid.UUID(old))
                        .values(compressed_at=datetime(2026, 2, 1, tzinfo=UTC)))
        session.commit()
    assert [e["id"] for e in _list(tenant).json()["items"]] == [new]
    listed = _list(tenant, include_compressed="true").json()["items"]
    assert [e["id"] for e in listed] == [old, new]
    assert listed[0]["compressed_at"] == "2026-02-01T00:00:00Z"


@pytest.mark.parametrize(("params", "phrase"), [
    ({"scope_ref": "ent_acme"}, "scope_ref needs scope"),
    ({"since": "2026-01-01T00:00:00"}, "since needs a timezone"),
    ({"kind": "Bad Kind"}, "query.kind"),
    ({"cursor": "%%%"}, "cursor is not valid"),
    ({"cursor": "WzFd"}, "cursor is not valid"),
    ({"cursor": "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiw1XQ"}, "cursor is not valid"),
    ({"limit": 5000}, "query.limit"),
])
def test_bad_list_queries_are_422(tenant: Tenant, params: dict[str, Any], phrase: str) -> None:
    answer = _list(tenant, **params)
    assert answer.status_code == 422, answer.text
    assert phrase in answer.json()["detail"]


def test_idempotency_key_replays_the_first_answer(tenant: Tenant) -> None:
    first = _post(tenant, _event(), headers={"Idempotency-Key": "evt-1"})
    again = _post(tenant, _event(), headers={"Idempotency-Key": "evt-1"})
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(_rows(tenant)) == 1 and len(tenant.objects()) == 1
    other = _post(tenant, _event(kind="decision"), headers={"Idempotency-Key": "evt-1"})
    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"
    assert len(_rows(tenant)) == 1 and len(tenant.objects()) == 1


def test_roles(tenant: Tenant) -> None:
    event = _post(tenant, _event(), key=tenant.key("agent"))
    assert event.status_code == 201
    compliance = tenant.key("compliance")
    refused = _post(tenant, _event(), key=compliance)
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden"
    with tenant.stack.http(compliance) as http:
        assert http.get(f"/v1/events/{event.json()['id']}").json()["body"] == BODY
        assert len(http.get("/v1/events").json()["items"]) == 1
    assert len(_rows(tenant)) == 1


def test_scoped_keys_see_and_write_only_their_scopes(tenant: Tenant) -> None:
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="acme bot", agent_id="acme-bot", scopes=[
            {"scope": "entity", "scope_ref": "ent_acme"}]).api_key
    outside = _append_at(tenant, "2026-01-01T00:00:00Z", scope_ref="ent_other")
    inside = _post(tenant, _event(), key=scoped)
    assert inside.status_code == 201
    assert inside.json()["agent_id"] == "acme-bot"
    refused = _post(tenant, _event(scope_ref="ent_other"), key=scoped)
    assert refused.status_code == 403
    assert refused.json() == {"error": "forbidden", "detail": (
        "this key's scopes do not include entity/ent_other: write there with a key whose "
        "scopes list it (an admin sets a key's scopes when creating it)")}
    wrong_agent = _post(tenant, _event(agent_id="someone-else"), key=scoped)
    assert wrong_agent.status_code == 403

    assert [e["id"] for e in _list(tenant, key=scoped).json()["items"]] == [inside.json()["id"]]
    assert _list(tenant, key=scoped, scope="entity",
                 scope_ref="ent_other").json()["items"] == []
    with tenant.stack.http(scoped) as http:
        hidden = http.get(f"/v1/events/{outside}")
        missing_id = uuid.uuid4()
        missing = http.get(f"/v1/events/{missing_id}")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == {"error": "not_found", "detail": f"no event {outside}"}
    assert missing.json() == {"error": "not_found", "detail": f"no event {missing_id}"}
    with Session(tenant.stack.engine) as session:
        failures = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.success.is_(False),
            AccessLog.operation == "read")).all()
    assert "entity event outside the key's scopes" in failures
    assert len(_rows(tenant)) == 2


def test_other_tenants_events_are_invisible(tenant: Tenant) -> None:
    event = _post(tenant, _event()).json()
    other = tenant.stack.new_tenant()
    with other.stack.http(other.admin_key) as http:
        answer = http.get(f"/v1/events/{event['id']}")
        listed = http.get("/v1/events").json()
    assert answer.status_code == 404
    assert answer.json() == {"error": "not_found", "detail": f"no event {event['id']}"}
    assert listed == {"items": [], "next_cursor": None}


def test_a_tampered_body_is_never_served(tenant: Tenant) -> None:
    event = _post(tenant, _event()).json()
    [stored] = tenant.objects()
    blob = bytearray(stored.read_bytes())
    blob[-5] ^= 0xFF
    stored.write_bytes(bytes(blob))
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.get(f"/v1/events/{event['id']}")
        stored.unlink()
        gone = http.get(f"/v1/events/{event['id']}")
    assert answer.status_code == 409
    problem = answer.json()
    assert problem["error"] == "hash_mismatch"
    assert (problem["event_id"], problem["expected_sha256"], problem["actual_sha256"]) == (
        event["id"], event["content_sha256"], None)
    assert "could not be decrypted" in problem["detail"]
    assert problem["reason"] == "undecryptable"
    assert gone.status_code == 409
    assert "missing from the bucket" in gone.json()["detail"]
    assert gone.json()["reason"] == "missing"
    assert [r.sync_status for r in _rows(tenant)] == ["corrupt"]
    with Session(tenant.stack.engine) as session:
        failed = session.scalar(select(func.count()).select_from(AccessLog).where(
            AccessLog.event_id == uuid.UUID(event["id"]), AccessLog.success.is_(False)))
    assert failed == 2


def test_appends_for_a_subject_under_erasure_are_409(tenant: Tenant) -> None:
    job_id = uuid.uuid4()
    with Session(tenant.stack.engine) as session:
        session.add(Job(id=job_id, tenant_id=tenant.id, kind="erase", state="completed",
                        subject="u-9", params={}, progress={}))
        session.flush()
        session.add(SubjectErasure(tenant_id=tenant.id, user_id="u-9", job_id=job_id,
                                   started_at=datetime.now(UTC)))
        session.commit()
    for body in (_event(user_id="u-9"), _event(scope="user", scope_ref="u-9")):
        answer = _post(tenant, body)
        assert answer.status_code == 409
        assert answer.json()["error"] == "subject_erasure_in_progress"
        assert answer.json()["job_id"] == str(job_id)
    assert _rows(tenant) == [] and tenant.objects() == []
    assert _post(tenant, _event(user_id="u-10")).status_code == 201


def test_an_event_body_is_only_in_the_bucket_and_encrypted_there(tenant: Tenant) -> None:
    marker = f"MARKER-{uuid.uuid4().hex}"
    event = _post(tenant, _event(body=f"# {marker}\nbody", user_id="u-1"),
                  headers={"Idempotency-Key": "marker"}).json()
    with tenant.stack.http(tenant.admin_key) as http:
        assert marker in http.get(f"/v1/events/{event['id']}").json()["body"]
        assert http.get("/v1/events").status_code == 200
    assert marker not in _database_text(tenant)
    assert _files_holding(tenant.stack.settings.data_dir, marker.encode()) == []


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    """Files under ``root`` containing ``needle``. The server keeps working meanwhile (audit
    checkpoints, SQLite journals): a file that vanishes between listing and reading held
    nothing that stayed."""
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and needle in path.read_bytes():
                found.append(path)
        except FileNotFoundError:
            continue
    return found
