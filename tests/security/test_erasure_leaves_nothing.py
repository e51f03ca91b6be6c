"""Issue 10, point 4: after a subject's erasure nothing personal of theirs is left in the
control plane — not in audit rows, idempotency rows, job rows, logs, nor in freed pages of
the SQLite file — and the audit chain still verifies.

The subject writes memories with distinctive keys, titles and tags (through the general
write path with an Idempotency-Key and through the one-statement fast path), reads, misses,
lists, deletes, has an export made; then an officer erases them. Afterwards the test scans
the raw bytes of the SQLite database and its write-ahead log, or every row of every
PostgreSQL table cast to text, and the server's log records, for each of those strings.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from sqlalchemy import text

import memplane
from control_plane.db.models import IdempotentResponse, Job
from control_plane.keys.pseudonyms import pseudonym
from tests.support.clock import wait_until
from tests.support.service import Tenant


def _strings(tag: str) -> dict[str, str]:
    """Distinctive strings, all plain ASCII letters, digits and '-' (so their
    percent-encoded form in object paths is the same bytes)."""
    return {
        "user": f"zqsubject-{tag}",
        "key_pref": f"zqkey-diet-{tag}",
        "key_conv": f"zqkey-holiday-{tag}",
        "key_agent": f"zqkey-ticket-{tag}",
        "key_list": f"zqkey-journal-{tag}",
        "key_missing": f"zqkey-absent-{tag}",
        "title_pref": f"Zqtitle diet plan {tag}",
        "title_conv": f"Zqtitle holiday in Lisbon {tag}",
        "title_agent": f"Zqtitle support ticket {tag}",
        "tag_a": f"zqtag-allergy-{tag}",
        "tag_b": f"zqtag-travel-{tag}",
    }


def _keyed(tenant: Tenant, user_id: str) -> str:
    return pseudonym(tenant.stack.runtime.plane.credentials, tenant.id, user_id)


def _wait_sealed(client: memplane.Client) -> memplane.AuditVerification:
    # The server's sealer is a background thread: wait for its outcome, with a deadline to
    # fail by on a loaded machine (not a timing check).
    verified: list[memplane.AuditVerification] = []

    def sealed() -> bool:
        verified.append(client.audit.verify())
        return verified[-1].unsealed <= 1  # the verify call's own row may not be sealed yet

    wait_until(sealed, "the sealing of the audit rows")
    return verified[-1]


def _database_hits(tenant: Tenant, needles: dict[str, str]) -> dict[str, list[str]]:
    """Where each needle still occurs: raw file bytes (SQLite) or table rows (PostgreSQL)."""
    engine = tenant.stack.engine
    hits: dict[str, list[str]] = {name: [] for name in needles}
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        assert database
        for suffix in ("", "-wal"):
            try:
                with open(database + suffix, "rb") as f:
                    blob = f.read()
            except FileNotFoundError:
                continue
            for name, needle in needles.items():
                if needle.encode() in blob:
                    hits[name].append(f"memplane.db{suffix}")
        return hits
    with engine.connect() as conn:
        tables = conn.execute(text(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'")).scalars().all()
        assert "access_logs" in tables and "idempotency_keys" in tables
        for table in tables:
            rows = conn.execute(text(f'SELECT t::text FROM "{table}" AS t')).scalars().all()
            for row in rows:
                for name, needle in needles.items():
                    if needle in row:
                        hits[name].append(f"{table}: {row[:200]}")
    return hits


def _server_log_hits(records: list[logging.LogRecord], needles: dict[str, str]) -> list[str]:
    found = []
    for record in records:
        if record.name.startswith(("httpx", "httpcore")):  # the test's own HTTP client
            continue
        text_ = f"{record.getMessage()} {record.__dict__!r}"
        found += [f"{record.name}: {name}" for name, needle in needles.items()
                  if needle in text_]
    return found


def _act_as_subject(client: memplane.Client, s: dict[str, str]) -> dict[str, Any]:
    """Everything a subject's agents might do; returns the pointers it made."""
    user = s["user"]
    pref = client.memory.set(scope="user", scope_ref=user, key=s["key_pref"],
                             value={"likes": "tea"}, title=s["title_pref"],
                             tags=[s["tag_a"]], idempotency_key=f"idem-pref-{uuid.uuid4()}")
    idem_conv = f"idem-conv-{uuid.uuid4()}"
    conv_args: dict[str, Any] = dict(
        scope="conversation", scope_ref="conv-shared", key=s["key_conv"],
        value={"note": "flight"}, title=s["title_conv"], tags=[s["tag_b"]], user_id=user,
        idempotency_key=idem_conv)
    conv = client.memory.set(**conv_args)
    replayed = client.memory.set(**conv_args)  # answered from the idempotency row
    assert replayed.id == conv.id and replayed.version == 1
    # No Idempotency-Key: the one-statement fast path (its audit row is written in SQL).
    agent = client.memory.set(scope="agent", scope_ref="support-bot", key=s["key_agent"],
                              value={"n": 1}, title=s["title_agent"],
                              tags=[s["tag_a"], s["tag_b"]], user_id=user)
    agent = client.memory.set(scope="agent", scope_ref="support-bot", key=s["key_agent"],
                              value={"n": 2}, user_id=user)
    assert agent.version == 2
    client.memory.append(scope="user", scope_ref=user, key=s["key_list"], value="day 1")
    client.memory.get(scope="user", scope_ref=user, key=s["key_pref"])
    client.memory.get(scope="agent", scope_ref="support-bot", key=s["key_agent"])
    with pytest.raises(memplane.NotFound):
        client.memory.get(scope="user", scope_ref=user, key=s["key_missing"])
    assert len(client.memory.list_pointers(user_id=user).items) == 4
    assert len(client.memory.list_pointers(scope="user", scope_ref=user).items) == 2
    client.memory.delete(scope="user", scope_ref=user, key=s["key_list"])
    return {"pref": pref, "conv": conv, "agent": agent, "conv_args": conv_args}


def test_erasure_leaves_nothing_personal_in_the_control_plane(
        tenant: Tenant, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    s = _strings(uuid.uuid4().hex[:10])
    officer_key = tenant.key("compliance")
    with tenant.client() as client, tenant.stack.client(officer_key) as officer:
        made = _act_as_subject(client, s)
        export = officer.jobs.wait(officer.memory.export(user_id=s["user"]).id, timeout=120)
        assert export.state == "completed", export.error

        # Before the erasure the log is useful: a write row shows its address, opened.
        rows = officer.audit.list(pointer_id=str(made["pref"].id), operation="write").items
        assert len(rows) == 1
        assert rows[0].detail == f"user v1 15 bytes user/{s['user']} key={s['key_pref']}"
        fast = officer.audit.list(pointer_id=str(made["agent"].id), operation="write").items
        assert [r.detail for r in fast] == [
            f"agent v{v} 7 bytes agent/support-bot key={s['key_agent']}" for v in (1, 2)]
        with tenant.stack.engine.connect() as conn:
            stored = " ".join(conn.execute(text(
                "SELECT detail FROM access_logs WHERE tenant_id = :t"),
                {"t": _db_id(tenant, tenant.id)}).scalars())
        assert "sealed:" in stored
        assert not [name for name, needle in s.items() if needle in stored]

        # The scan sees them while they are live (it is not blind).
        before = _database_hits(tenant, s)
        assert all(before[name] for name in ("user", "key_pref", "title_conv", "tag_b"))

        erase = officer.jobs.wait(officer.memory.erase_user(s["user"]).id, timeout=120)
        assert erase.state == "completed", erase.error
        assert erase.result["counts"]["pointers"] == 3
        assert erase.result["counts"]["exports"] == 1

        verification = _wait_sealed(officer)
        assert (verification.ok, verification.first_bad_seq) == (True, None)
        # The rows are unchanged, but what named the subject can no longer be opened.
        rows = officer.audit.list(pointer_id=str(made["pref"].id), operation="write").items
        assert len(rows) == 1
        assert rows[0].detail == "user v1 15 bytes [erased subject]"
        everything = " ".join(e.detail for e in officer.audit.list(limit=1000).items)
        assert [name for name, needle in s.items() if needle in everything] == []

        # Job rows: the erasure and the earlier export keep a keyed hash only.
        officer.receipts.get(erase.result["receipt_id"])  # the receipt is readable
        with tenant.stack.engine.connect() as conn:
            subjects = set(conn.execute(text(
                "SELECT subject FROM jobs WHERE id IN (:a, :b)"),
                {"a": _db_id(tenant, export.id), "b": _db_id(tenant, erase.id)}).scalars())
        assert subjects == {_keyed(tenant, s["user"])}

    hits = _database_hits(tenant, s)
    assert hits == {name: [] for name in s}
    assert _server_log_hits(caplog.records, s) == []

    # The erased idempotency answer is not replayed: the same request writes anew.
    with tenant.client() as client:
        again = client.memory.set(**made["conv_args"])
    assert again.id != made["conv"].id and again.version == 1


def _db_id(tenant: Tenant, value: Any) -> Any:
    """A UUID as the database stores it (SQLite: 32 hex characters)."""
    parsed = uuid.UUID(str(value))
    return parsed if tenant.stack.engine.dialect.name == "postgresql" else parsed.hex


def test_expired_idempotency_answer_is_never_replayed(tenant: Tenant) -> None:
    idem = f"idem-{uuid.uuid4()}"
    args: dict[str, Any] = dict(scope="team", scope_ref="T1", key="plan", value={"v": 1},
                                idempotency_key=idem)
    with tenant.client() as client:
        first = client.memory.set(**args)
        assert client.memory.set(**args).version == 1  # replayed within the day
        with tenant.stack.engine.begin() as conn:
            changed = conn.execute(
                IdempotentResponse.__table__.update()
                .where(IdempotentResponse.tenant_id == tenant.id,
                       IdempotentResponse.key == idem)
                .values(created_at=_hours_ago(25)))
            assert changed.rowcount == 1
        again = client.memory.set(**args)
        assert (again.id, again.version) == (first.id, 2)  # written, not replayed
        assert client.memory.set(**args).version == 2  # the new answer is replayed
    with tenant.stack.engine.connect() as conn:
        count = conn.execute(text(
            "SELECT count(*) FROM idempotency_keys WHERE key = :k"), {"k": idem}).scalar()
    assert count == 1


def _hours_ago(hours: int) -> Any:
    from datetime import UTC, datetime, timedelta

    return datetime.now(UTC) - timedelta(hours=hours)


def test_the_subjects_failed_jobs_forget_them_too(tenant: Tenant) -> None:
    user = f"zqfailed-{uuid.uuid4().hex[:10]}"
    failed_id = uuid.uuid4()
    with tenant.stack.engine.begin() as conn:
        conn.execute(Job.__table__.insert().values(
            id=failed_id, tenant_id=tenant.id, kind="export", subject=user,
            params={"format": "json"}, state="failed", progress={}, attempts=3,
            error=f"StorageUnavailable: could not list memories/user/{user}/",
            created_at=_hours_ago(1), updated_at=_hours_ago(1)))
    with tenant.stack.client(tenant.key("compliance")) as officer:
        erase = officer.jobs.wait(officer.memory.erase_user(user).id, timeout=120)
        assert erase.state == "completed", erase.error
        officer.receipts.get(erase.result["receipt_id"])  # the receipt is readable
    with tenant.stack.engine.connect() as conn:
        row = conn.execute(Job.__table__.select().where(Job.id == failed_id)).one()
    assert (row.subject, row.error) == (
        _keyed(tenant, user),
        "StorageUnavailable: details removed at a data subject's erasure")
