"""The DLP guard on memories by key (PUT, append, batch sets), on the live service: each mode,
and a refusal that leaves nothing anywhere — no pointer, no object, no audit detail, no log
line holding the value."""

from __future__ import annotations

import logging

import pytest

from tests.dlp.helpers import CARD, PASSWORD, SSN, assert_nowhere, new_ref, refused, set_policy
from tests.support.service import Tenant

VALUE = {"note": f"pay with {CARD}", "login": {"password": PASSWORD}, "ok": [1, "fine"]}
CARD_REFUSAL = ("the value holds a payment card number and a password (at the value.note, "
                "the value.login.password); remove it (keep it in a secrets manager and "
                "store a reference), or ask an admin to set the DLP policy's mode to redact "
                "or flag (PUT /v1/dlp/policy)")


def test_refuse_leaves_no_pointer_no_object_and_no_trace(
        tenant: Tenant, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    set_policy(tenant, "refuse")
    ref = new_ref()
    with tenant.stack.http(tenant.key("agent")) as http:
        put = http.put(f"/v1/memories/user/{ref}/pay", json={"value": VALUE, "tags": ["t"]})
        refused(put, ["card", "password"], CARD_REFUSAL)
        append = http.post(f"/v1/memories/user/{ref}/log/append", json={"value": f"ssn {SSN}"})
        refused(append, ["ssn"], "the item holds a US social security number; remove it "
                "(keep it in a secrets manager and store a reference), or ask an admin to set "
                "the DLP policy's mode to redact or flag (PUT /v1/dlp/policy)")
        titled = http.put(f"/v1/memories/user/{ref}/t", json={"value": 1,
                                                               "title": f"pwd: {PASSWORD}"})
        assert titled.status_code == 422 and titled.json()["kinds"] == ["password"]
        assert "the title holds a password" in titled.json()["detail"]
        tagged = http.put(f"/v1/memories/user/{ref}/t", json={"value": 1,
                                                              "tags": [f"ssn {SSN}"]})
        assert tagged.json()["detail"].startswith("the tags hold a US social security number;")
        assert http.get(f"/v1/memories/user/{ref}/pay").status_code == 404
        assert http.get(f"/v1/memories/user/{ref}/log").status_code == 404
        assert http.get("/v1/pointers", params={"scope_ref": ref}).json()["items"] == []
        texts = [put.text, append.text, titled.text, tagged.text]
    assert tenant.objects() == []
    failures = [d for d in _audit(tenant) if d.startswith("write ") or d.startswith("append ")]
    assert len(failures) == 4
    assert all("sensitive_data" in d for d in failures)
    assert_nowhere(tenant, caplog.text, *texts)


def test_a_batch_refuses_the_sensitive_set_and_stores_the_others(tenant: Tenant) -> None:
    set_policy(tenant, "refuse", ["card"])
    ref = new_ref()
    ops = [{"op": "set", "scope": "user", "scope_ref": ref, "key": "a", "value": "plain"},
           {"op": "set", "scope": "user", "scope_ref": ref, "key": "b", "value": [CARD]},
           {"op": "set", "scope": "user", "scope_ref": ref, "key": "c", "value": f"ssn {SSN}"}]
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.post("/v1/memories:batch", json={"operations": ops})
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert [r["status"] for r in results] == [200, 422, 200]
        assert results[1]["error"] == "sensitive_data"
        assert results[1]["detail"].startswith("the value holds a payment card number (at "
                                               "the value[0]);")
        assert http.get(f"/v1/memories/user/{ref}/b").status_code == 404
        # ssn is not among the policy's kinds: stored as sent, untagged
        got = http.get(f"/v1/memories/user/{ref}/c").json()
        assert got["value"] == f"ssn {SSN}" and not got["pointer"]["tags"]
    assert len(tenant.objects()) == 2
    assert_nowhere_but_ssn(tenant, answer.text)


def assert_nowhere_but_ssn(tenant: Tenant, *texts: str) -> None:
    for t in texts:
        assert CARD not in t and CARD.replace(" ", "") not in t


def test_redact_stores_the_redacted_value_in_the_bucket(tenant: Tenant) -> None:
    set_policy(tenant, "redact")
    ref = new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        put = http.put(f"/v1/memories/user/{ref}/pay",
                       json={"value": VALUE, "tags": ["billing"], "title": f"ssn {SSN}"})
        assert put.status_code == 200, put.text
        assert put.json()["tags"] == ["billing"] and put.json()["title"] == "ssn [redacted:ssn]"
        got = http.get(f"/v1/memories/user/{ref}/pay").json()
        assert got["value"] == {"note": "pay with [redacted:card]",
                                "login": {"password": "[redacted:password]"}, "ok": [1, "fine"]}
        appended = http.post(f"/v1/memories/user/{ref}/log/append",
                             json={"value": {"said": f"my password is {PASSWORD}"}})
        assert appended.status_code == 200, appended.text
        assert http.get(f"/v1/memories/user/{ref}/log").json()["value"] == [
            {"said": "my password is [redacted:password]"}]
    assert_nowhere(tenant, put.text)


def test_flag_tags_the_memory_and_stores_it_as_sent(tenant: Tenant) -> None:
    ref = new_ref()  # the default policy: flag, every kind
    with tenant.stack.http(tenant.admin_key) as http:
        put = http.put(f"/v1/memories/user/{ref}/pay",
                       json={"value": VALUE, "tags": ["billing", "sensitive:card"]})
        assert put.status_code == 200, put.text
        assert put.json()["tags"] == ["billing", "sensitive:card", "sensitive:password"]
        assert http.get(f"/v1/memories/user/{ref}/pay").json()["value"] == VALUE
        plain = http.put(f"/v1/memories/user/{ref}/plain", json={"value": "no secrets"})
        assert plain.json()["tags"] == []
        full = http.put(f"/v1/memories/user/{ref}/full",
                        json={"value": SSN, "tags": [f"t{i}" for i in range(50)]})
        assert full.status_code == 422, full.text
        assert "over 50 tags; send fewer tags" in full.json()["detail"]
        listed = http.get("/v1/pointers", params={"tag": "sensitive:password"}).json()["items"]
        assert [p["key"] for p in listed] == ["pay"]


@pytest.mark.parametrize("mode", ["off", "flag"])
def test_off_and_flag_store_the_value_as_sent(tenant: Tenant, mode: str) -> None:
    set_policy(tenant, mode)
    ref = new_ref()
    with tenant.stack.http(tenant.admin_key) as http:
        put = http.put(f"/v1/memories/user/{ref}/pay", json={"value": VALUE})
        assert put.status_code == 200, put.text
        assert put.json()["tags"] == ([] if mode == "off" else
                                      ["sensitive:card", "sensitive:password"])
        assert http.get(f"/v1/memories/user/{ref}/pay").json()["value"] == VALUE


def _audit(tenant: Tenant) -> list[str]:
    from tests.dlp.helpers import audit_details
    return audit_details(tenant)


