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
