"""PUT/GET /v1/dlp/policy over HTTP: the defaults, a set policy read back, a sentence for a
bad body, admin only, audited without values, and the write path following at once."""

from __future__ import annotations

import pytest

from control_plane.dlp.detect import KINDS
from tests.dlp.helpers import CARD, audit_details, set_policy
from tests.support.service import Tenant


def test_the_defaults_then_a_set_policy_read_back(tenant: Tenant) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        first = http.get("/v1/dlp/policy")
        assert first.status_code == 200, first.text
        assert first.json() == {"mode": "flag", "kinds": list(KINDS), "is_default": True,
                                "extracted_mode": "refuse", "updated_at": None}
        put = http.put("/v1/dlp/policy", json={"mode": "refuse", "kinds": ["ssn", "card"]})
        assert put.status_code == 200, put.text
        again = http.get("/v1/dlp/policy").json()
        assert {k: again[k] for k in ("mode", "kinds", "is_default")} == {
            "mode": "refuse", "kinds": ["card", "ssn"], "is_default": False}
        assert again["updated_at"] is not None and again == put.json()
    details = audit_details(tenant)
    assert "dlp_policy_update mode=refuse kinds=card,ssn" in details
    assert details.count("dlp_policy_read ") == 2


@pytest.mark.parametrize(("body", "says"), [
    ({"mode": "refuse", "kinds": ["card", "passport"]},
     "unknown kind(s) 'passport'; the kinds are card, ssn, iban, private_key, cloud_key, "
     "bearer_token, password"),
    ({"mode": "block"}, "body.mode"),
    ({"mode": "flag", "extra": 1}, "body.extra"),
])
def test_a_bad_body_is_422_with_a_sentence(tenant: Tenant, body: dict[str, object],
                                           says: str) -> None:
    with tenant.stack.http(tenant.admin_key) as http:
        answer = http.put("/v1/dlp/policy", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"] == "validation_error"
        assert says in answer.json()["detail"]
        assert http.get("/v1/dlp/policy").json()["is_default"] is True


@pytest.mark.parametrize("role", ["agent", "compliance"])
def test_only_an_admin_reads_or_sets_the_policy(tenant: Tenant, role: str) -> None:
    key = tenant.key(role)
    with tenant.stack.http(key) as http:
        assert http.get("/v1/dlp/policy").status_code == 403
        put = http.put("/v1/dlp/policy", json={"mode": "off"})
        assert put.status_code == 403
        assert put.json()["error"] == "forbidden"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.get("/v1/dlp/policy").json()["mode"] == "flag"


def test_a_change_applies_to_the_next_write_and_stays_in_its_tenant(tenant: Tenant) -> None:
    other = tenant.stack.new_tenant()
    set_policy(tenant, "refuse")
    body = {"value": {"note": f"card {CARD}"}}
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put("/v1/memories/user/u-1/pay", json=body).status_code == 422
        set_policy(tenant, "off")
        stored = http.put("/v1/memories/user/u-1/pay", json=body)
        assert stored.status_code == 200, stored.text
        assert stored.json()["tags"] is None or stored.json()["tags"] == []
    with tenant.stack.http(other.admin_key) as http:
        assert http.get("/v1/dlp/policy").json()["is_default"] is True
        flagged = http.put("/v1/memories/user/u-1/pay", json=body)
        assert flagged.status_code == 200, flagged.text
        assert flagged.json()["tags"] == ["sensitive:card"]

