"""The seed's own routes (``/memory``, ``/memory/events``) against a live server, on SQLite
and PostgreSQL: each answers exactly what the v1 route it aliases answers, takes the seed's
spelling (``scopeRef``, camelCase bodies), and keeps v1's auth, roles, scoped keys, audit,
idempotency and error shapes."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.support.service import Tenant

CALL = ("## Call with Acme\n- Agreed to raise the **ROAS** target to 4.\n"
        "- Maria owns the Q3 budget.")
SEED_EVENT = {"scope": "entity", "scopeRef": "ent_acme", "kind": "call_summary",
              "body": CALL, "source": "call", "sourceRef": "call-2291",
              "occurredAt": "2026-03-02T14:05:00Z"}
SEED_ENTRY = {"scope": "entity", "scopeRef": "ent_acme", "title": "Acme: ROAS target",
              "summary": "Acme agreed a **ROAS target of 4** for Q3.", "tags": ["decision"],
              "importance": 4, "source": "call"}


def _event_count(http: httpx.Client) -> int:
    return len(http.get("/v1/events", params={"include_compressed": "true",
                                              "limit": 1000}).json()["items"])


def _entry_count(http: httpx.Client) -> int:
    return len(http.get("/v1/entries", params={"limit": 1000}).json()["items"])


def _without(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names}


def test_how_skills_use_memory_after_a_call(tenant: Tenant) -> None:
    """The seed's pattern: log the call summary as an event, keep the decision as an
    entry, then load the entity's memory by tag and words."""
    with tenant.stack.http(tenant.key("agent")) as http:
        appended = http.post("/memory/events", json=SEED_EVENT)
        assert appended.status_code == 201, appended.text
        event = appended.json()
        created = http.post("/memory", json=SEED_ENTRY)
        assert created.status_code == 201, created.text
        entry = created.json()
        events = http.get("/memory/events", params={"scope": "entity",
                                                     "scopeRef": "ent_acme"})
        found = http.get("/memory", params={"scope": "entity", "scopeRef": "ent_acme",
                                            "tag": "decision", "search": "ROAS",
                                            "minImportance": 4})
        v1_event = http.get(f"/v1/events/{event['id']}").json()
        v1_entry = http.get(f"/v1/entries/{entry['id']}").json()

    assert (event["scope"], event["scope_ref"], event["kind"], event["source"],
            event["source_ref"], event["occurred_at"], event["compressed_at"]) == (
        "entity", "ent_acme", "call_summary", "call", "call-2291", "2026-03-02T14:05:00Z",
        None)
    assert events.status_code == 200, events.text
    assert events.json() == {"items": [v1_event], "next_cursor": None}
    assert v1_event["body"] == CALL
    assert (entry["scope"], entry["scope_ref"], entry["title"], entry["summary"],
            entry["tags"], entry["importance"], entry["source"]) == (
        "entity", "ent_acme", "Acme: ROAS target", SEED_ENTRY["summary"], ["decision"], 4,
        "call")
    assert found.status_code == 200, found.text
    assert found.json() == {"items": [v1_entry], "next_cursor": None}


def test_an_entry_by_id_reads_updates_and_deletes_like_v1(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.key("agent")) as http:
        entry = http.post("/memory", json=SEED_ENTRY).json()
        path = f"/memory/{entry['id']}"
        read = http.get(path)
        v1_read = http.get(f"/v1/entries/{entry['id']}")
        updated = http.put(path, json={"title": "Acme: ROAS target raised",
                                       "summary": "ROAS target now **5**.", "tags": ["okr"],
                                       "importance": 5})
        after = http.get(f"/v1/entries/{entry['id']}").json()
        deleted = http.delete(path)
        gone, v1_gone = http.get(path), http.get(f"/v1/entries/{entry['id']}")
        again = http.delete(path)

    assert (read.status_code, read.json()) == (200, v1_read.json())
    assert updated.status_code == 200, updated.text
    assert updated.json() == after
    assert (after["title"], after["summary"], after["tags"], after["importance"],
            after["source"], after["version"]) == (
        "Acme: ROAS target raised", "ROAS target now **5**.", ["okr"], 5, "api", 2)
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert gone.status_code == v1_gone.status_code == 404
    assert gone.json() == v1_gone.json()
    assert again.json() == v1_gone.json()


def test_snake_case_and_camel_case_are_the_same_request(tenant: Tenant) -> None:
    snake = {"scope": "entity", "scope_ref": "ent_acme", "kind": "decision", "body": "b",
             "source_ref": "r1", "occurred_at": "2026-01-01T00:00:00Z", "user_id": "u1"}
    camel = {"scope": "entity", "scopeRef": "ent_acme", "kind": "decision", "body": "b",
             "sourceRef": "r1", "occurredAt": "2026-01-01T00:00:00Z", "userId": "u1"}
    with tenant.stack.http(tenant.admin_key) as http:
        first = http.post("/memory/events", json=snake, headers={"Idempotency-Key": "e-1"})
        second = http.post("/memory/events", json=camel, headers={"Idempotency-Key": "e-1"})
        through_v1 = http.post("/v1/events", json=snake, headers={"Idempotency-Key": "e-1"})
        by_snake = http.get("/memory/events", params={"scope": "entity",
                                                      "scope_ref": "ent_acme"}).json()
        by_camel = http.get("/memory/events", params={"scope": "entity",
                                                      "scopeRef": "ent_acme"}).json()
        count = _event_count(http)

    assert first.status_code == 201, first.text
    # One request, whichever spelling and whichever route: the retries replay the first.
    assert second.status_code == through_v1.status_code == 201
    assert second.headers["Idempotent-Replayed"] == through_v1.headers["Idempotent-Replayed"] \
        == "true"
    assert second.json() == through_v1.json() == first.json()
    assert first.json()["user_id"] == "u1"
    assert count == 1
    assert by_snake == by_camel
    assert [e["id"] for e in by_snake["items"]] == [first.json()["id"]]


def test_list_answers_without_bodies_or_summaries_when_asked(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        event = http.post("/memory/events", json=SEED_EVENT).json()
        entry = http.post("/memory", json=SEED_ENTRY).json()
        events = http.get("/memory/events", params={"scope": "entity", "scopeRef": "ent_acme",
                                                    "includeBody": "false"}).json()
        v1_events = http.get("/v1/events", params={"scope": "entity",
                                                   "scope_ref": "ent_acme"}).json()
        entries = http.get("/memory", params={"scope": "entity", "scopeRef": "ent_acme",
                                              "includeSummary": "false"}).json()
        v1_entries = http.get("/v1/entries", params={"scope": "entity",
                                                     "scope_ref": "ent_acme"}).json()

    assert events == {"items": [{**v1_events["items"][0], "body": None}], "next_cursor": None}
    assert v1_events["items"][0]["id"] == event["id"]
    assert entries == v1_entries
    assert [(e["id"], e["summary"]) for e in entries["items"]] == [(entry["id"], None)]


def test_compressed_events_are_listed_only_when_asked(tenant: Tenant) -> None:
    from sqlalchemy import update

    from control_plane.db.models import MemoryEvent

    with tenant.stack.http(tenant.admin_key) as http:
        old = http.post("/memory/events", json={**SEED_EVENT, "kind": "decision"}).json()
        new = http.post("/memory/events", json=SEED_EVENT).json()
        with tenant.stack.engine.begin() as db:
            db.execute(update(MemoryEvent).where(MemoryEvent.id == uuid.UUID(old["id"]))
                       .values(compressed_at=MemoryEvent.created_at))
        default = http.get("/memory/events", params={"scope": "entity",
                                                     "scopeRef": "ent_acme"}).json()
        asked = http.get("/memory/events", params={"scope": "entity", "scopeRef": "ent_acme",
                                                   "includeCompressed": "true"}).json()
        by_kind = http.get("/memory/events", params={"scope": "entity", "scopeRef": "ent_acme",
                                                     "kind": "decision",
                                                     "include_compressed": "true"}).json()

    assert [e["id"] for e in default["items"]] == [new["id"]]
    assert sorted(e["id"] for e in asked["items"]) == sorted([old["id"], new["id"]])
    assert [(e["id"], e["compressed_at"] is not None) for e in by_kind["items"]] \
        == [(old["id"], True)]


BAD_INPUT = [
    # (name, method, path, json body, query, phrase in detail)
    ("no kind", "POST", "/memory/events", {"scope": "entity", "scopeRef": "e", "body": "b"},
     None, "body.kind: this field is required"),
    ("the two spellings disagree", "POST", "/memory/events",
     {**SEED_EVENT, "scope_ref": "ent_other"}, None,
     "scopeRef and scope_ref are the same field with different values; send one of them"),
    ("unknown field", "POST", "/memory/events", {**SEED_EVENT, "colour": "red"}, None,
     "body.colour: Extra inputs are not permitted"),
    ("time without a timezone", "POST", "/memory/events",
     {**SEED_EVENT, "occurredAt": "2026-03-02T14:05:00"}, None, "body.occurred_at"),
    ("entry importance 9", "POST", "/memory", {**SEED_ENTRY, "importance": 9}, None,
     "body.importance"),
    ("entry source compactor", "POST", "/memory", {**SEED_ENTRY, "source": "compactor"},
     None, "compactor"),
    ("entry without a summary", "PUT", f"/memory/{uuid.UUID(int=1)}", {"title": "t"}, None,
     "body.summary: this field is required"),
    ("not an id", "GET", "/memory/not-an-id", None, None, "path.entry_id"),
    ("scopeRef without scope", "GET", "/memory/events", None, {"scopeRef": "ent_acme"},
     "scope_ref needs scope"),
    ("query spellings disagree", "GET", "/memory", None,
     {"scope": "entity", "scopeRef": "a", "scope_ref": "b"},
     "query parameters scope_ref and its camelCase spelling have different values"),
    ("minImportance 0", "GET", "/memory", None, {"minImportance": "0"}, "query.minImportance"),
    ("NUL in scopeRef", "GET", "/memory", None, {"scope": "entity", "scopeRef": "a\x00b"},
     "query.scopeRef"),
    ("bad cursor", "GET", "/memory/events", None, {"cursor": "%%%"}, "cursor is not valid"),
]


@pytest.mark.parametrize("case", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_refused_with_a_sentence_and_writes_nothing(
        tenant: Tenant, case: tuple[str, str, str, Any, Any, str]) -> None:
    _, method, path, body, query, phrase = case
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.request(method, path, json=body, params=query)
        counts = (_event_count(http), _entry_count(http))

    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "validation_error"
    assert phrase in answer.json()["detail"]
    assert counts == (0, 0)


def test_roles_and_auth_answer_as_on_v1(tenant: Tenant) -> None:
    officer = tenant.key("compliance")
    with tenant.stack.http(officer) as http:
        seed_denied = http.post("/memory/events", json=SEED_EVENT)
        v1_denied = http.post("/v1/events", json={**_without(SEED_EVENT, "scopeRef",
                                                               "sourceRef", "occurredAt"),
                                                  "scope_ref": "ent_acme"})
        entry_denied = http.post("/memory", json=SEED_ENTRY)
        readable = http.get("/memory", params={"scope": "entity", "scopeRef": "ent_acme"})
    with tenant.stack.http() as anonymous:
        no_key = anonymous.get("/memory/events")
        v1_no_key = anonymous.get("/v1/events")
    with tenant.stack.http("mp_not_a_key") as stranger:
        bad_key = stranger.post("/memory", json=SEED_ENTRY)

    assert seed_denied.status_code == v1_denied.status_code == entry_denied.status_code == 403
    assert seed_denied.json() == v1_denied.json()
    assert readable.status_code == 200
    assert no_key.status_code == v1_no_key.status_code == 401
    assert no_key.json() == v1_no_key.json()
    assert bad_key.status_code == 401
    with tenant.stack.http(tenant.admin_key) as http:
        denials = http.get("/v1/audit", params={"operation": "access_denied"}).json()["items"]
        counts = (_event_count(http), _entry_count(http))
    assert [row["success"] for row in denials] == [False, False, False]
    assert counts == (0, 0)


def test_another_tenants_ids_are_not_found_exactly_as_missing_ones(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    with tenant.stack.http(tenant.admin_key) as http:
        event = http.post("/memory/events", json=SEED_EVENT).json()
        entry = http.post("/memory", json=SEED_ENTRY).json()
    missing = str(uuid.uuid4())
    with tenant.stack.http(other.admin_key) as http:
        answers = {
            "get": http.get(f"/memory/{entry['id']}"),
            "put": http.put(f"/memory/{entry['id']}", json={"title": "x", "summary": "y"}),
            "delete": http.delete(f"/memory/{entry['id']}"),
            "get_missing": http.get(f"/memory/{missing}"),
            "v1_get": http.get(f"/v1/entries/{entry['id']}"),
        }
        listed = http.get("/memory", params={"scope": "entity", "scopeRef": "ent_acme"}).json()
        events = http.get("/memory/events", params={"scope": "entity",
                                                    "scopeRef": "ent_acme"}).json()
        v1_event = http.get(f"/v1/events/{event['id']}")

    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 404)
    assert answers["get"].json() == answers["v1_get"].json()
    assert answers["put"].json() == answers["delete"].json() == answers["get"].json()
    assert answers["get_missing"].json()["detail"] \
        == answers["get"].json()["detail"].replace(entry["id"], missing)
    assert listed == events == {"items": [], "next_cursor": None}
    assert v1_event.status_code == 404
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get(f"/memory/{entry['id']}").json()["summary"] == SEED_ENTRY["summary"]


def test_a_scoped_key_sees_only_its_scopes_through_the_seed_routes(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        inside = http.post("/memory", json=SEED_ENTRY).json()
        outside = http.post("/memory", json={**SEED_ENTRY, "scopeRef": "ent_other"}).json()
        http.post("/memory/events", json=SEED_EVENT)
        http.post("/memory/events", json={**SEED_EVENT, "scopeRef": "ent_other"})
        key = http.post("/v1/api-keys", json={
            "role": "agent", "name": "acme bot", "agent_id": "acme-bot",
            "scopes": [{"scope": "entity", "scope_ref": "ent_acme"}]}).json()["api_key"]
    with tenant.stack.http(key) as http:
        listed = http.get("/memory").json()
        events = http.get("/memory/events").json()
        read_inside = http.get(f"/memory/{inside['id']}")
        read_outside = http.get(f"/memory/{outside['id']}")
        v1_outside = http.get(f"/v1/entries/{outside['id']}")
        write_outside = http.post("/memory/events", json={**SEED_EVENT,
                                                          "scopeRef": "ent_other"})
        v1_write_outside = http.post("/v1/events", json={
            **_without(SEED_EVENT, "scopeRef", "sourceRef", "occurredAt"),
            "scope_ref": "ent_other"})
        written = http.post("/memory/events", json=SEED_EVENT)

    assert [e["id"] for e in listed["items"]] == [inside["id"]]
    assert {(e["scope_ref"], e["body"]) for e in events["items"]} == {("ent_acme", CALL)}
    assert read_inside.status_code == 200
    assert (read_outside.status_code, read_outside.json()) == (404, v1_outside.json())
    assert write_outside.status_code == v1_write_outside.status_code == 403
    assert write_outside.json()["detail"].startswith(
        "this key's scopes do not include entity/ent_other: ")
    assert write_outside.json() == v1_write_outside.json()
    assert written.status_code == 201
    assert written.json()["agent_id"] == "acme-bot"


def test_seed_reads_are_audited_like_v1_reads(tenant: Tenant) -> None:
    agent = tenant.key("agent")
    with tenant.stack.http(agent) as http:
        event = http.post("/memory/events", json=SEED_EVENT).json()
        entry = http.post("/memory", json=SEED_ENTRY).json()
        http.get(f"/memory/{entry['id']}")
        http.get("/memory/events", params={"scope": "entity", "scopeRef": "ent_acme"})
    with tenant.stack.http(tenant.admin_key) as http:
        rows = http.get("/v1/audit", params={"limit": 1000}).json()["items"]

    entry_reads = [r for r in rows if r["operation"] == "read"
                   and r["pointer_id"] == entry["id"]]
    event_reads = [r for r in rows if r["operation"] == "read"
                   and r.get("event_id") == event["id"]]
    assert len(entry_reads) == 1
    assert len(event_reads) == 1
    assert entry_reads[0]["accessor_id"] == event_reads[0]["accessor_id"]
    assert entry_reads[0]["accessor_id"].startswith("key:")
    assert CALL not in str(rows) and SEED_ENTRY["summary"] not in str(rows)
