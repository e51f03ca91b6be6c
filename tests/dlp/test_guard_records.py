"""The DLP guard on events (body), entries (title, summary, tags), knowledge documents (title,
content, metadata) and conversation messages (content), on the live service: each mode."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.dlp.helpers import CARD, PASSWORD, SSN, assert_nowhere, new_ref, set_policy
from tests.support.service import Tenant

HOW = ("remove it (keep it in a secrets manager and store a reference), or ask an admin to "
       "set the DLP policy's mode to redact or flag (PUT /v1/dlp/policy)")


def _event(http: httpx.Client, ref: str, body: str) -> httpx.Response:
    return http.post("/v1/events", json={"scope": "entity", "scope_ref": ref,
                                         "kind": "call_summary", "body": body})


def _entry(http: httpx.Client, ref: str, title: str, summary: str) -> httpx.Response:
    return http.post("/v1/entries", json={"scope": "entity", "scope_ref": ref, "title": title,
                                          "summary": summary, "tags": ["decision"]})


def _knowledge(http: httpx.Client, agent: str, content: str) -> httpx.Response:
    return http.post("/v1/knowledge", json={"agent_id": agent, "documents": [
        {"title": "Refunds", "content": "Refunds take 30 days."},
        {"title": "Access", "content": content, "metadata": {"owner": "ops"}}]})


def _message(http: httpx.Client, conversation: str, content: str) -> httpx.Response:
    return http.post(f"/v1/conversations/{conversation}/messages",
                     json={"role": "user", "content": content, "user_id": "u-7"})


def _chunk(http: httpx.Client, agent: str, document_id: str) -> dict[str, Any]:
    key = quote(f"knowledge/{document_id}/0000", safe="")
    got: dict[str, Any] = http.get(f"/v1/memories/agent/{agent}/{key}").json()
    return got


def test_refuse_on_every_kind_of_record_writes_nothing(
        tenant: Tenant, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    set_policy(tenant, "refuse")
    ref, agent, conversation = new_ref(), new_ref(), new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        event = _event(http, ref, f"Customer read out card {CARD}.")
        assert event.status_code == 422 and event.json()["error"] == "sensitive_data"
        assert event.json()["detail"] == (
            f"the event's body holds a payment card number; {HOW}")
        entry = _entry(http, ref, f"ssn {SSN}", f"password: {PASSWORD}")
        assert entry.status_code == 422 and entry.json()["kinds"] == ["ssn", "password"]
        assert entry.json()["detail"] == (
            "this write holds a US social security number and a password (in the entry's "
            f"title, the entry's summary); {HOW}")
        docs = _knowledge(http, agent, f"The root password is: {PASSWORD}")
        assert docs.status_code == 422 and docs.json()["kinds"] == ["password"]
        assert docs.json()["detail"] == f"document 2's content holds a password; {HOW}"
        message = _message(http, conversation, f"my password is {PASSWORD}")
        assert message.status_code == 422
        assert message.json()["detail"] == f"the message's content holds a password; {HOW}"
        assert http.get("/v1/events", params={"scope": "entity",
                                              "scope_ref": ref}).json()["items"] == []
        assert http.get("/v1/entries", params={"scope": "entity",
                                               "scope_ref": ref}).json()["items"] == []
        assert http.get("/v1/knowledge", params={"agent_id": agent}).json()["items"] == []
        assert http.get(f"/v1/conversations/{conversation}").status_code == 404
        texts = [event.text, entry.text, docs.text, message.text]
    assert tenant.objects() == []
    assert_nowhere(tenant, caplog.text, *texts)


def test_redact_stores_the_redacted_text(tenant: Tenant) -> None:
    set_policy(tenant, "redact")
    ref, agent, conversation = new_ref(), new_ref(), new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        event = _event(http, ref, f"Customer read out card {CARD}.")
        assert event.status_code == 201, event.text
        got = http.get(f"/v1/events/{event.json()['id']}").json()
        assert got["body"] == "Customer read out card [redacted:card]."
        entry = _entry(http, ref, f"ssn {SSN}", f"password: {PASSWORD}")
        assert entry.status_code == 201, entry.text
        read = http.get(f"/v1/entries/{entry.json()['id']}").json()
        assert (read["title"], read["summary"], read["tags"]) == (
            "ssn [redacted:ssn]", "password: [redacted:password]", ["decision"])
        docs = _knowledge(http, agent, f"The root password is: {PASSWORD}")
        assert docs.status_code == 201, docs.text
        chunk = _chunk(http, agent, docs.json()["documents"][1]["document_id"])
        assert chunk["value"]["content"] == "The root password is: [redacted:password]"
        message = _message(http, conversation, f"my password is {PASSWORD} ok")
        assert message.status_code == 201, message.text
        listed = http.get(f"/v1/conversations/{conversation}/messages").json()["items"]
        assert [m["content"] for m in listed] == ["my password is [redacted:password] ok"]
        texts = [event.text, entry.text, docs.text, message.text]
    assert_nowhere(tenant, *texts)


def test_flag_tags_what_has_tags_and_stores_everything_as_sent(tenant: Tenant) -> None:
    set_policy(tenant, "flag")
    ref, agent, conversation = new_ref(), new_ref(), new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        event = _event(http, ref, f"Customer read out card {CARD}.")
        assert event.status_code == 201, event.text
        assert http.get(f"/v1/events/{event.json()['id']}").json()["body"] == (
            f"Customer read out card {CARD}.")
        entry = _entry(http, ref, "Login", f"password: {PASSWORD}")
        assert entry.status_code == 201, entry.text
        assert entry.json()["tags"] == ["decision", "sensitive:password"]
        docs = _knowledge(http, agent, f"The root password is: {PASSWORD}")
        assert docs.status_code == 201, docs.text
        ids = [d["document_id"] for d in docs.json()["documents"]]
        assert _chunk(http, agent, ids[0])["pointer"]["tags"] == []
        chunk = _chunk(http, agent, ids[1])
        assert chunk["pointer"]["tags"] == ["sensitive:password"]
        assert chunk["value"]["content"] == f"The root password is: {PASSWORD}"
        message = _message(http, conversation, f"ssn {SSN}")
        assert message.status_code == 201, message.text
        pointer = message.json()["pointer_id"]
        tagged = http.get("/v1/pointers", params={"tag": "sensitive:ssn"}).json()["items"]
        assert [p["id"] for p in tagged] == [pointer]


def test_off_stores_every_record_as_sent(tenant: Tenant) -> None:
    set_policy(tenant, "off")
    ref, conversation = new_ref(), new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        entry = _entry(http, ref, "Login", f"password: {PASSWORD}")
        assert entry.status_code == 201 and entry.json()["tags"] == ["decision"]
        message = _message(http, conversation, f"ssn {SSN}")
        assert message.status_code == 201, message.text
        listed = http.get(f"/v1/conversations/{conversation}/messages").json()["items"]
        assert [m["content"] for m in listed] == [f"ssn {SSN}"]
        assert http.get("/v1/pointers", params={"tag": "sensitive:ssn"}).json()["items"] == []


def test_a_summary_job_redacts_what_refuse_would_refuse(tenant: Tenant) -> None:
    from tests.conversations.test_messages import _job_done

    conversation = new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        pad = " We went over the plan for the quarter again." * 8
        for text in (f"My ssn is {SSN} for the form.", "Hello again.", "Thanks.", "Bye."):
            added = http.post(f"/v1/conversations/{conversation}/messages", json={
                "role": "user", "content": text + pad, "context_window_limit": 256})
            assert added.status_code == 201, added.text
            if SSN in text:
                assert added.json()["conversation"]["needs_summarization"] is False
                # After the message was stored (flagged), before any summary job can be
                # queued: the window crosses its limit only with a later message, so a
                # summary that starts before the change never holds the number unredacted.
                set_policy(tenant, "refuse")
        job = _job_done(http, http.post(f"/v1/conversations/{conversation}/summarize")
                        .json()["id"])
        assert job["state"] == "completed" and job["result"]["summarized"] is True, job
        summary = http.get(f"/v1/memories/conversation/{conversation}/summary")
        assert summary.status_code == 200, summary.text
        assert "[redacted:ssn]" in summary.text and SSN not in summary.text


def test_an_entry_update_is_screened_like_a_create(tenant: Tenant) -> None:
    ref = new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        created = _entry(http, ref, "Login", "Use the shared vault.")
        assert created.status_code == 201 and created.json()["tags"] == ["decision"]
        entry = f"/v1/entries/{created.json()['id']}"
        set_policy(tenant, "refuse")
        update = {"title": "Login", "summary": f"pwd: {PASSWORD}", "tags": ["decision"]}
        refused = http.put(entry, json=update)
        assert refused.status_code == 422 and refused.json()["kinds"] == ["password"]
        assert http.get(entry).json()["summary"] == "Use the shared vault."
        set_policy(tenant, "redact")
        redacted = http.put(entry, json=update)
        assert redacted.status_code == 200, redacted.text
        assert redacted.json()["summary"] == "pwd: [redacted:password]"
        assert http.get(entry).json()["summary"] == "pwd: [redacted:password]"
        texts = [refused.text, redacted.text]
    assert_nowhere(tenant, *texts)
