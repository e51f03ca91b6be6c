"""Admin endpoints: KEK rotation and retirement, the integrity sweep."""

from __future__ import annotations

from tests.support.service import Tenant


def test_rotate_retire_and_verify_over_http(tenant: Tenant) -> None:
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="a", value={"n": 1})
        client.memory.set(scope="agent", scope_ref="bot", key="b", value=[1, 2])
    agent_key = tenant.key("agent")
    with tenant.stack.http(tenant.admin_key) as http:
        rotated = http.post("/v1/keys/rotate")
        retired = http.post("/v1/keys/retire")
        listed = http.get("/v1/keys/kek")
        verified = http.post("/v1/integrity/verify")
        bad = http.post("/v1/keys/rotate", json={"provider": "local", "key_ref": "arn:x"})
    with tenant.stack.http(agent_key) as http:
        denied = http.post("/v1/keys/rotate")
    with tenant.client() as client:
        assert client.memory.get(scope="user", scope_ref="u1", key="a").value == {"n": 1}

    assert rotated.status_code == 200
    assert {k: rotated.json()[k] for k in ("from_versions", "to_version", "rewrapped")} == {
        "from_versions": [1], "to_version": 2, "rewrapped": 2}
    assert (retired.json()["retired"], retired.json()["current"]) == ([1], 2)
    assert [(v["version"], v["current"], v["retired"], v["subject_keys"])
            for v in listed.json()["items"]] == [(1, False, True, 0), (2, True, False, 2)]
    report = verified.json()
    assert {k: report[k] for k in ("clean", "checked", "ok", "missing", "corrupt",
                                   "orphaned")} == {
        "clean": True, "checked": 2, "ok": 2, "missing": 0, "corrupt": 0, "orphaned": 0}
    assert bad.status_code == 422
    assert "leave key_ref out" in bad.json()["detail"]
    assert denied.status_code == 403
