"""Conversations over HTTP on SQLite and PostgreSQL: messages stored as encrypted keyed
memories, exact token counts, the needs_summarization threshold and the automatic summary
(offline extractive summariser), listing, deletion, roles, scoped keys and idempotency."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import select

from control_plane.conversations import tokens
from control_plane.db.models import AccessLog, Conversation, MemoryPointer
from tests.api.test_no_content_in_control_plane import _database_text
from tests.support.clock import wait_until
from tests.support.crypto import tampered
from tests.support.service import Tenant


def _add(http: httpx.Client, conv: str, content: str, role: str = "user",
         **fields: Any) -> dict[str, Any]:
    answer = http.post(f"/v1/conversations/{conv}/messages",
                       json={"role": role, "content": content} | fields)
    assert answer.status_code == 201, answer.text
    return answer.json()  # type: ignore[no-any-return]


def _job_done(http: httpx.Client, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def finished() -> bool:
        found.update(http.get(f"/v1/jobs/{job_id}").json())
        return found["state"] in ("completed", "failed")

    wait_until(finished, f"job {job_id}")
    return found


def test_known_token_counts() -> None:
    # o200k_base: "hello" | " world"; the pangram is 9 words + "." = 10 tokens in both.
    o200k = tokens.for_model("gpt-4o")
    assert (o200k.encoding, o200k.count("hello world"), o200k.message("hello world")) == (
        "o200k_base", 2, 6)
    assert o200k.count("The quick brown fox jumps over the lazy dog.") == 10
    assert tokens.for_model("gpt-4").encoding == "cl100k_base"
    assert tokens.for_model("my-local-llama").encoding == "o200k_base"
    assert o200k.count("") == 0
    assert o200k.truncate("The quick brown fox jumps", 3) == "The quick brown"


def test_message_is_stored_encrypted_counted_and_listed(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    marker = f"secret-{uuid.uuid4().hex}"
    with tenant.stack.http(tenant.admin_key) as http:
        first = _add(http, conv, "hello world", user_id="u-conv", agent_id="bot")
        second = _add(http, conv, f"The quick brown fox jumps over the lazy dog. {marker}",
                      role="assistant")
        state = http.get(f"/v1/conversations/{conv}").json()
        listed = http.get(f"/v1/conversations/{conv}/messages").json()
        page = http.get(f"/v1/conversations/{conv}/messages", params={"after": 1}).json()
    assert (first["seq"], first["tokens"]) == (1, 6)
    assert first["conversation"]["context_window_tokens"] == 6
    second_tokens = 4 + tokens.for_model("gpt-4o").count(
        f"The quick brown fox jumps over the lazy dog. {marker}")
    assert (second["seq"], second["tokens"]) == (2, second_tokens)
    assert state["context_window_tokens"] == 6 + second_tokens
    assert (state["model"], state["encoding"], state["context_window_limit"]) == (
        "gpt-4o", "o200k_base", 128_000)
    assert (state["user_id"], state["agent_id"], state["message_count"]) == ("u-conv", "bot", 2)
    assert (state["needs_summarization"], state["summarize_at_tokens"]) == (False, 102_400)
    assert [(m["seq"], m["role"], m["content"], m["summarized"]) for m in listed["items"]] == [
        (1, "user", "hello world", False),
        (2, "assistant", f"The quick brown fox jumps over the lazy dog. {marker}", False)]
    assert [m["seq"] for m in page["items"]] == [2]
    with tenant.stack.engine.connect() as conn:
        pointer = conn.execute(select(MemoryPointer).where(
            MemoryPointer.id == uuid.UUID(first["pointer_id"]))).one()
    assert (pointer.scope_type, pointer.scope_ref, pointer.key, pointer.memory_type,
            pointer.subject_user_id) == ("conversation", conv, "m/00000001",
                                         "conversation_history", "u-conv")
    assert marker not in _database_text(tenant)
    assert all(marker.encode() not in p.read_bytes() for p in tenant.objects())


def test_a_listing_of_messages_is_audited_with_a_read_per_message(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        added = [_add(http, conv, text) for text in ("one", "two", "three")]
        listed = http.get(f"/v1/conversations/{conv}/messages", params={"after": 1})
    assert listed.status_code == 200, listed.text
    with tenant.stack.engine.connect() as conn:
        rows = conn.execute(select(AccessLog.operation, AccessLog.pointer_id, AccessLog.detail,
                                   AccessLog.accessed_at)
                            .where(AccessLog.tenant_id == tenant.id,
                                   AccessLog.operation.in_(("list", "read")),
                                   AccessLog.detail.like("conversation message%"))
                            .order_by(AccessLog.id)).all()
    assert [(r[0], str(r[1]) if r[1] else None, r[2]) for r in rows] == [
        ("list", None, "conversation messages after=1 -> 2"),
        ("read", added[1]["pointer_id"], "conversation message 2"),
        ("read", added[2]["pointer_id"], "conversation message 3")]
    assert len({r[3] for r in rows}) == 1  # one insert, committed before the answer
    assert conv not in " ".join(r[2] for r in rows)


def test_threshold_flips_and_the_summary_covers_the_older_messages(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    line = "We agreed to move 20% of the budget to Meta on Friday."
    cost = tokens.for_model("gpt-4o").message(line)  # 19
    # limit 256: summarise at 204 tokens (0.8), keep the newest 64 tokens (0.25) verbatim.
    needed = -(-204 // cost)
    with tenant.stack.http(tenant.admin_key) as http:
        answers = [_add(http, conv, f"{line}", context_window_limit=256)
                   for _ in range(needed)]
        before = [a["conversation"]["needs_summarization"] for a in answers]
        job_id = answers[-1]["conversation"]["summary_job_id"]
        job = _job_done(http, job_id)
        state = http.get(f"/v1/conversations/{conv}").json()
        listed = http.get(f"/v1/conversations/{conv}/messages").json()["items"]
        summary = http.get(f"/v1/memories/conversation/{conv}/summary").json()
    assert before == [False] * (needed - 1) + [True]
    assert answers[-2]["conversation"]["context_window_tokens"] == (needed - 1) * cost
    assert answers[-1]["conversation"]["context_window_tokens"] == needed * cost
    kept = 64 // cost
    assert job["state"] == "completed"
    assert job["result"]["messages"] == needed - kept
    assert (state["summarized_through"], state["context_window_tokens"]) == (
        needed - kept, kept * cost)
    assert (state["needs_summarization"], state["summary_job_id"]) == (False, None)
    assert state["summary_pointer_id"] == summary["pointer"]["id"]
    assert summary["pointer"]["memory_type"] == "summary"
    assert summary["value"]["through"] == needed - kept
    assert line.rstrip(".") in summary["value"]["text"]
    assert [m["summarized"] for m in listed] == [True] * (needed - kept) + [False] * kept


def test_delete_removes_messages_summary_and_rows(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "one", user_id="u-del")
        _add(http, conv, "two")
        job = http.post(f"/v1/conversations/{conv}/summarize")
        assert job.status_code == 202, job.text
        _job_done(http, job.json()["id"])
        gone = http.delete(f"/v1/conversations/{conv}")
        after = http.get(f"/v1/conversations/{conv}")
    assert gone.status_code == 204
    assert after.status_code == 404
    assert after.json() == {"error": "not_found", "detail": f"no conversation {conv!r}"}
    with tenant.stack.engine.connect() as conn:
        left = conn.scalars(select(MemoryPointer.id).where(
            MemoryPointer.tenant_id == tenant.id, MemoryPointer.scope_ref == conv)).all()
        rows = conn.scalars(select(Conversation.id).where(
            Conversation.tenant_id == tenant.id)).all()
        details = conn.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.operation == "delete")).all()
    assert (left, rows) == ([], [])
    assert "conversation: 2 messages and summaries deleted" in details
    assert not any("conversation/" in str(p) for p in tenant.objects())


def test_bad_input_gets_a_sentence(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, conv, "hi", user_id="u-1", model="gpt-4")
        other_model = http.post(f"/v1/conversations/{conv}/messages",
                                json={"role": "user", "content": "x", "model": "gpt-4o"})
        other_user = http.post(f"/v1/conversations/{conv}/messages",
                               json={"role": "user", "content": "x", "user_id": "u-2"})
        bad_role = http.post(f"/v1/conversations/{conv}/messages",
                             json={"role": "robot", "content": "x"})
        dots = http.post("/v1/conversations/../messages", json={"role": "user", "content": "x"})
        missing = http.get("/v1/conversations/nope-never")
    assert other_model.status_code == 422
    assert other_model.json()["detail"] == (
        "this conversation counts tokens for model 'gpt-4', fixed by its first message; leave "
        "model out or send 'gpt-4'")
    assert other_user.status_code == 422
    assert "user_id differs from the conversation's data subject" in other_user.json()["detail"]
    assert bad_role.status_code == 422
    assert dots.status_code in (404, 422)
    assert missing.status_code == 404


def test_roles_scoped_keys_and_idempotency(tenant: Tenant) -> None:
    conv, other = f"c-{uuid.uuid4().hex[:8]}", f"c-{uuid.uuid4().hex[:8]}"
    with tenant.client() as admin:
        scoped = admin.keys.create(role="agent", name="conv bot", agent_id="conv-bot", scopes=[
            {"scope": "conversation", "scope_ref": conv}]).api_key
    compliance = tenant.key("compliance")
    with tenant.stack.http(tenant.admin_key) as http:
        _add(http, other, "not yours")
    with tenant.stack.http(scoped) as http:
        mine = _add(http, conv, "mine")
        refused = http.post(f"/v1/conversations/{other}/messages",
                            json={"role": "user", "content": "x"})
        hidden = http.get(f"/v1/conversations/{other}/messages")
        first = http.post(f"/v1/conversations/{conv}/messages",
                          json={"role": "user", "content": "again"},
                          headers={"Idempotency-Key": "k-1"})
        retry = http.post(f"/v1/conversations/{conv}/messages",
                          json={"role": "user", "content": "again"},
                          headers={"Idempotency-Key": "k-1"})
    with tenant.stack.http(compliance) as http:
        state = http.get(f"/v1/conversations/{conv}")
        write = http.post(f"/v1/conversations/{conv}/messages",
                          json={"role": "user", "content": "x"})
    assert mine["conversation"]["agent_id"] == "conv-bot"
    assert refused.status_code == 403  # a write names its address: refused plainly
    assert refused.json()["detail"] == (
        f"this key's scopes do not include conversation/{other}: write there with a key "
        "whose scopes list it (an admin sets a key's scopes when creating it)")
    assert hidden.status_code == 404  # a read answers as missing
    assert hidden.json()["detail"] == f"no conversation {other!r}"
    assert (first.status_code, retry.status_code) == (201, 201)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert state.status_code == 200
    assert state.json()["message_count"] == 2
    assert write.status_code == 403


def test_a_tampered_message_fails_the_listing_and_is_marked_corrupt(tenant: Tenant) -> None:
    conv = f"c-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        added = [_add(http, conv, text, user_id="u-tamper")
                 for text in ("first words", "second words", "third words")]
        with tenant.stack.engine.connect() as conn:
            path = conn.scalar(select(MemoryPointer.storage_path).where(
                MemoryPointer.id == uuid.UUID(added[1]["pointer_id"])))
        stored = tenant.bucket_dir / path.split(f"tenants/{tenant.id}/", 1)[1]
        stored.write_bytes(tampered(stored.read_bytes()))
        listed = http.get(f"/v1/conversations/{conv}/messages")
        after = http.get(f"/v1/conversations/{conv}/messages", params={"after": 2})
    assert listed.status_code == 409, listed.text
    assert listed.json()["error"] == "hash_mismatch"
    assert "second words" not in listed.text and "first words" not in listed.text
    assert after.status_code == 200, after.text
    assert [(m["seq"], m["content"]) for m in after.json()["items"]] == [(3, "third words")]
    with tenant.stack.engine.connect() as conn:
        status = {str(p.id): p.sync_status for p in conn.execute(select(MemoryPointer).where(
            MemoryPointer.id.in_([uuid.UUID(a["pointer_id"]) for a in added])))}
        failures = conn.execute(select(AccessLog.pointer_id, AccessLog.detail).where(
            AccessLog.tenant_id == tenant.id, AccessLog.success.is_(False),
            AccessLog.detail.like("hash_mismatch%"))).all()
    assert status == {added[0]["pointer_id"]: "synced", added[1]["pointer_id"]: "corrupt",
                      added[2]["pointer_id"]: "synced"}
    assert [str(f[0]) for f in failures] == [added[1]["pointer_id"]]
