"""Roles: admin does everything; agent works with memories; compliance reads and audits."""

from __future__ import annotations

import pytest

import memplane
from tests.support.service import Tenant


def test_agent_may_write_and_read_but_not_audit_or_manage_keys(tenant: Tenant) -> None:
    with tenant.stack.client(tenant.key("agent")) as agent:
        agent.memory.set(scope="agent", scope_ref="bot", key="k", value=1)
        assert agent.memory.get(scope="agent", scope_ref="bot", key="k").value == 1
        with pytest.raises(memplane.Forbidden) as audit_denied:
            agent.audit.list()
        with pytest.raises(memplane.Forbidden):
            agent.keys.create(role="admin", name="escalate")
        with pytest.raises(memplane.Forbidden):
            agent.tenants.create(name="another")
    assert "role 'agent' may not read the audit log" in audit_denied.value.detail


def test_compliance_may_read_and_audit_but_not_write(tenant: Tenant) -> None:
    with tenant.client() as admin:
        admin.memory.set(scope="user", scope_ref="u1", key="k", value="v")
    with tenant.stack.client(tenant.key("compliance")) as officer:
        assert officer.memory.get(scope="user", scope_ref="u1", key="k").value == "v"
        assert officer.audit.verify().ok is True
        with pytest.raises(memplane.Forbidden) as denied:
            officer.memory.set(scope="user", scope_ref="u1", key="k", value="changed")
        with pytest.raises(memplane.Forbidden):
            officer.memory.delete(scope="user", scope_ref="u1", key="k")
    assert "use a key with role admin or agent" in denied.value.detail
    with tenant.client() as admin:
        assert admin.memory.get(scope="user", scope_ref="u1", key="k").value == "v"
        denials = admin.audit.list(operation="access_denied").items
    assert [e.success for e in denials] == [False, False]


def test_only_the_bootstrap_key_creates_tenants(tenant: Tenant) -> None:
    with tenant.client() as admin, pytest.raises(memplane.Forbidden) as denied:
        admin.tenants.create(name="nope")
    assert "bootstrap admin key" in denied.value.detail


# The memory routes, search and the event log's append find their caller in their worker
# thread rather than through a FastAPI dependency (control_plane/deps.py, call_of): the same
# answers, for every one of them.
_MEMORY_ROUTES = [
    ("GET", "/v1/memories/user/u1/k", None),
    ("PUT", "/v1/memories/user/u1/k", {"value": 1}),
    ("POST", "/v1/memories/user/u1/list/append", {"value": 1}),
    ("DELETE", "/v1/memories/user/u1/k", None),
    ("GET", "/v1/pointers", None),
    ("POST", "/v1/memories:batch",
     {"operations": [{"op": "get", "scope": "user", "scope_ref": "u1", "key": "k"}]}),
    ("POST", "/v1/search", {"query": "anything"}),
    ("POST", "/v1/events", {"scope": "user", "scope_ref": "u1", "kind": "note", "body": "b"}),
]


@pytest.mark.parametrize(("method", "path", "body"), _MEMORY_ROUTES)
def test_memory_routes_refuse_a_missing_or_unknown_key(tenant: Tenant, method: str, path: str,
                                                       body: object) -> None:
    for key in (None, "mp_not-a-key-of-anyone"):
        with tenant.stack.http(key) as http:
            answer = http.request(method, path, json=body)
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"] == "unauthorized"


def test_memory_writes_refuse_a_reader_role_and_audit_the_refusal(tenant: Tenant) -> None:
    officer = tenant.key("compliance")
    writes = [r for r in _MEMORY_ROUTES if r[0] != "GET" and r[1] not in ("/v1/memories:batch",
                                                                          "/v1/search")]
    for method, path, body in writes:
        with tenant.stack.http(officer) as http:
            answer = http.request(method, path, json=body)
        assert answer.status_code == 403, answer.text
        assert answer.json()["detail"] == ("a key with role 'compliance' may not write "
                                           "memories; use a key with role admin or agent")
    with tenant.client() as admin:
        denials = admin.audit.list(operation="access_denied").items
    assert [(e.success, e.detail) for e in denials] == [
        (False, "write memories needs role admin or agent")] * len(writes)
