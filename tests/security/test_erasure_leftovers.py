"""After a subject's erasure no control-plane row and no bucket object keeps their id (raw,
percent-encoded or JSON-escaped), their key names or their conversations' ids (DESIGN §1
I4, §11, §12) — also when the subject deleted their memories and conversations before the
erasure, when a cleanup, export or compactor job of theirs failed or is still running, when
an agent key was scoped to them, when the orphan GC keeps tombstones of their objects and
when a hold on their conversation was lifted.

The test reads every row of ``jobs``, ``api_keys``, ``gc_candidates``, ``legal_holds``,
``search_segments`` and ``subject_keys`` of the tenant, each serialised to text.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
from sqlalchemy import select

from control_plane.compactor import service as compactor
from control_plane.db.base import utcnow
from control_plane.db.models import (
    ApiKey,
    CompactionEvent,
    GcCandidate,
    Job,
    LegalHold,
    MemoryEvent,
    MemoryPointer,
    SearchSegment,
    StorageConfig,
    SubjectKey,
)
from control_plane.events import service as events
from control_plane.events.schemas import EventIn
from control_plane.identity import Actor
from control_plane.keys.pseudonyms import pseudonym
from tests.search.test_search_api import _index
from tests.support.service import ServiceWorld, Tenant

TABLES = (Job, ApiKey, GcCandidate, LegalHold, SearchSegment, SubjectKey)


def _ok(answer: httpx.Response) -> Any:
    assert answer.status_code < 300, answer.text
    return answer.json() if answer.content else None


def _rows(tenant: Tenant) -> dict[str, list[str]]:
    """Every row of the tables, for the tenant, as text."""
    found: dict[str, list[str]] = {}
    with tenant.stack.engine.connect() as conn:
        for model in TABLES:
            table = model.__table__  # type: ignore[attr-defined]
            rows = conn.execute(select(table).where(table.c.tenant_id == tenant.id)).all()
            found[table.name] = [repr(tuple(row)) + json.dumps(
                [str(v) for v in row]) for row in rows]
    return found


def _hits(rows: dict[str, list[str]], needles: dict[str, str]) -> list[str]:
    return [f"{table}: {name} in {row[:300]}" for table, found in rows.items()
            for row in found for name, needle in needles.items() if needle in row]


def _files(tenant: Tenant) -> list[str]:
    root = tenant.bucket_dir
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def _ago(hours: int) -> datetime:
    return datetime.now(UTC) - timedelta(hours=hours)


def _jobs(tenant: Tenant, user: str, key: str, conversation: str) -> dict[str, uuid.UUID]:
    """The subject's jobs as the workers leave them: a cleanup of their scope still running
    on another worker, a cleanup that failed on a path of theirs, a failed export (its
    result and error quote a storage error's path), a compactor run of their scope still
    running, a failed summary of their conversation."""
    encoded = quote(user, safe="")
    path = f"gs://b/tenants/{tenant.id}/memories/user/{encoded}/{key}/0001.json"
    storage_error = f"StorageError: {path}: the object changed while it was read"
    grants = [{"scope": "user", "scope_ref": user}, {"scope": "team", "scope_ref": "T9"}]
    later = datetime.now(UTC) + timedelta(hours=1)
    running = dict(state="running", lease_owner="another-worker", lease_expires_at=later,
                   attempts=1)
    made = {
        "cleanup_running": dict(kind="cleanup", subject=user, **running, params={
            "scope": "user", "scope_ref": user, "older_than_days": 30, "dry_run": False,
            "exclude_keys": [key], "before": _ago(1).isoformat(), "grants": grants}),
        "cleanup_failed": dict(kind="cleanup", subject=None, state="failed", attempts=3,
                               params={"scope": None, "older_than_days": 30,
                                       "dry_run": False, "exclude_keys": ["roadmap"],
                                       "before": _ago(1).isoformat(), "grants": grants},
                               error=storage_error, result={"error": storage_error}),
        "export_failed": dict(kind="export", subject=user, state="failed", attempts=3,
                              params={"format": "json"}, error=storage_error,
                              result={"error": storage_error}),
        "compact_failed": dict(kind="compact", subject=user, state="failed", attempts=3,
                               params={"scope": "user", "scope_ref": user},
                               error=storage_error, result={"error": storage_error}),
        "summarize_failed": dict(kind="summarize", subject=None, state="failed", attempts=3,
                                 params={"conversation_id": conversation},
                                 error=f"StorageUnavailable: could not read memories/"
                                       f"conversation/{conversation}/summary/x.json",
                                 result={"error": "StorageUnavailable: see error"}),
    }
    ids = {name: uuid.uuid4() for name in made}
    with tenant.stack.engine.begin() as conn:
        for name, values in made.items():
            conn.execute(Job.__table__.insert().values(
                id=ids[name], tenant_id=tenant.id, progress={}, created_at=_ago(2),
                updated_at=_ago(2), **values))
    return ids


def test_erasure_leaves_no_row_or_object_naming_the_subject(tenant: Tenant) -> None:
    tag = uuid.uuid4().hex[:8]
    user = f"bob-josé-{tag}"
    enc = quote(user, safe="")
    diet, note = f"diet-{tag}", f"bobnote-{tag}"
    conv_deleted, conv_cleared = f"c-bob-{tag}", f"c-bob-kept-{tag}"
    needles = {"bob": "bob", "user": user, "encoded": enc, "json": json.dumps(user)[1:-1],
               "diet": diet, "note": note, "conv_deleted": conv_deleted,
               "conv_cleared": conv_cleared}
    runtime = tenant.stack.runtime
    with tenant.stack.http(tenant.admin_key) as http:
        _ok(http.put(f"/v1/memories/user/{enc}/{diet}",
                     json={"value": "Bob is vegetarian and avoids fish."}))
        team_note = _ok(http.put(f"/v1/memories/team/T9/{note}",
                                 json={"value": "Bob leads the spring trip.", "user_id": user}))
        _ok(http.put("/v1/memories/team/T9/roadmap", json={"value": "ship in May"}))
        for conversation in (conv_deleted, conv_cleared):
            _ok(http.post(f"/v1/conversations/{conversation}/messages",
                          json={"role": "user", "content": "Bob books the trip to Porto.",
                                "user_id": user}))
        _index(tenant)
        with tenant.stack.engine.connect() as conn:
            indexed = set(conn.execute(select(SearchSegment.scope_type, SearchSegment.scope_ref)
                                       .where(SearchSegment.tenant_id == tenant.id)).all())
        assert {("user", user), ("conversation", conv_deleted),
                ("conversation", conv_cleared)} <= indexed  # the scan is not blind

        only_bob = _ok(http.post("/v1/api-keys", json={
            "role": "agent", "name": "diet assistant",
            "scopes": [{"scope": "user", "scope_ref": user}]}))
        mixed = _ok(http.post("/v1/api-keys", json={
            "role": "agent", "name": "trip planner",
            "scopes": [{"scope": "conversation", "scope_ref": conv_cleared},
                       {"scope": "team", "scope_ref": "T9"}]}))
        hold = _ok(http.post("/v1/legal-holds", json={
            "reason": "litigation", "scope": "conversation", "scope_ref": conv_cleared}))
        _ok(http.delete(f"/v1/legal-holds/{hold['id']}"))

        # The subject's memories and conversations are deleted before the erasure.
        _ok(http.delete(f"/v1/memories/user/{enc}"))
        _ok(http.delete(f"/v1/conversations/{conv_deleted}"))
        _ok(http.delete(f"/v1/memories/conversation/{conv_cleared}"))

        # A write transaction from its start (SQLite: BEGIN IMMEDIATE, in the server's queue
        # of writers): a read then a write could meet a commit of the server's background
        # work in between and fail at once with "database is locked".
        with tenant.stack.engine.connect() as conn, \
                conn.execution_options(sqlite_begin="IMMEDIATE").begin():
            config_id = conn.scalar(select(StorageConfig.id).where(
                StorageConfig.tenant_id == tenant.id))
            tombstones = {
                "mine": f"tenants/{tenant.id}/memories/user/{enc}/{diet}/0001.json",
                "note": team_note["storage_path"].rsplit("/", 1)[0] + "/0000.json",
                "conversation": f"tenants/{tenant.id}/events/conversation/{conv_cleared}/"
                                "2026-01/0000.json",
                "bystander": f"tenants/{tenant.id}/memories/team/T9/roadmap/0000.json"}
            for path in tombstones.values():
                conn.execute(GcCandidate.__table__.insert().values(
                    storage_config_id=config_id, path=path, tenant_id=tenant.id,
                    marked_at=_ago(3), swept_at=_ago(2)))
        jobs = _jobs(tenant, user, diet, conv_cleared)
        assert _hits(_rows(tenant), {"user": user})  # the scan sees the subject's rows

        with tenant.stack.client(tenant.key("compliance")) as officer:
            done = officer.jobs.wait(officer.memory.erase_user(user).id, timeout=120)
        assert done.state == "completed", done.error

        # A key scoped only to the erased subject reaches nothing: revoked at once.
        with tenant.stack.http(only_bob["api_key"]) as revoked:
            assert revoked.get("/v1/memories/team/T9/roadmap").status_code == 401
        with tenant.stack.http(mixed["api_key"]) as kept:
            assert kept.get("/v1/memories/team/T9/roadmap").status_code == 200

    left = _rows(tenant)
    assert _hits(left, needles) == []
    assert [name for name in _files(tenant) if any(n in name for n in needles.values())] == []
    keyed = pseudonym(runtime.plane.credentials, tenant.id, user)
    with tenant.stack.engine.connect() as conn:
        keys = {row.id: row for row in conn.execute(select(ApiKey).where(
            ApiKey.tenant_id == tenant.id, ApiKey.role == "agent"))}
        gc_paths = set(conn.scalars(select(GcCandidate.path).where(
            GcCandidate.tenant_id == tenant.id)))
        holds = conn.execute(select(LegalHold.scope_ref, LegalHold.subject_hash).where(
            LegalHold.tenant_id == tenant.id)).all()
        segments = conn.execute(select(SearchSegment.scope_type, SearchSegment.scope_ref)
                                .where(SearchSegment.tenant_id == tenant.id)).all()
        job_rows = {row.id: row for row in conn.execute(select(Job).where(
            Job.id.in_(list(jobs.values()))))}
    bob_key, mixed_key = (keys[uuid.UUID(k["id"])] for k in (only_bob, mixed))
    assert (bob_key.scopes, bob_key.revoked_at is not None) == (
        [{"scope": "user", "scope_ref": keyed}], True)
    assert (mixed_key.scopes, mixed_key.revoked_at) == (
        [{"scope": "conversation", "scope_ref": keyed},
         {"scope": "team", "scope_ref": "T9"}], None)
    assert gc_paths == {tombstones["bystander"]}
    assert holds == [(None, keyed)]
    assert {tuple(s) for s in segments} <= {("team", "T9")}
    scrubbed = "StorageError: details removed at a data subject's erasure"
    cleanup = job_rows[jobs["cleanup_running"]]
    assert (cleanup.subject, cleanup.params) == (
        keyed, {"older_than_days": 30, "dry_run": False, "scope": "user"})
    failed = job_rows[jobs["cleanup_failed"]]
    assert (failed.params["grants"], failed.error, failed.result) == (
        [{"scope": "user", "scope_ref": keyed}, {"scope": "team", "scope_ref": "T9"}],
        scrubbed, {"error": scrubbed})
    export = job_rows[jobs["export_failed"]]
    assert (export.subject, export.error, export.result) == (keyed, scrubbed,
                                                             {"error": scrubbed})
    compact = job_rows[jobs["compact_failed"]]
    assert (compact.subject, compact.params["scope_ref"], compact.error, compact.result) == (
        keyed, keyed, scrubbed, {"error": scrubbed})
    summary = job_rows[jobs["summarize_failed"]]
    assert (summary.params, summary.error) == (
        {"conversation_id": keyed},
        "StorageUnavailable: details removed at a data subject's erasure")


def test_no_compactor_entry_covers_the_events_of_two_subjects(world: ServiceWorld) -> None:
    """Events of bob, of dan and of no subject, interleaved in one team scope, and events
    of dan in bob's own scope: each entry covers one subject's events at most (those of no
    subject may share an entry, sealed under the scope key), and is that subject's."""
    tag = uuid.uuid4().hex[:8]
    bob, dan = f"bob-{tag}", f"dan-{tag}"
    with world.runtime.sessions() as session:
        for i in range(12):
            for scope, ref, user in (("team", "T9", (bob, None, dan)[i % 3]),
                                     ("user", bob, (None, dan)[i % 2])):
                spec = EventIn(scope=scope, scope_ref=ref, kind="call_summary",  # type: ignore[arg-type]
                               body=f"note {i} of {user}",
                               occurred_at=utcnow() - timedelta(days=120, minutes=60 - i),
                               user_id=user)
                assert isinstance(events.append_event(session, world.runtime.plane,
                                                      world.actor, spec), MemoryEvent)
    with world.runtime.sessions() as session:
        done = compactor.compact_tenant(session, world.runtime.plane, world.runtime.settings,
                                        world.tenant_id,
                                        actor=Actor(world.tenant_id, "system", "test")).as_dict()
    with world.runtime.sessions() as session:
        entries = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id, MemoryPointer.source == "compactor")))
        covered = {(e.scope_type, e.scope_ref, e.subject_user_id): {
            row.subject_user_id for row in session.scalars(
                select(MemoryEvent).join(CompactionEvent,
                                         CompactionEvent.event_id == MemoryEvent.id)
                .where(CompactionEvent.compaction_id == e.id))} for e in entries}
    assert done["events_compressed"] == 24
    assert covered == {("team", "T9", bob): {bob}, ("team", "T9", None): {None},
                       ("team", "T9", dan): {dan}, ("user", bob, bob): {bob},
                       ("user", bob, dan): {dan}}
