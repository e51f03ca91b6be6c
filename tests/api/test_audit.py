"""I6: every operation, failed ones included, is audited; the chain detects tampering."""

from __future__ import annotations

import time
import uuid

import pytest
from sqlalchemy import text

import memplane
from tests.support.service import Tenant


def _wait_sealed(client: memplane.Client) -> memplane.AuditVerification:
    # The server's sealer is a real background thread: poll its outcome, with a deadline
    # generous enough for a loaded machine (a deadline to fail by, not a timing check).
    deadline = time.monotonic() + 60
    while True:
        result = client.audit.verify()
        if result.unsealed <= 1:  # the verify call's own row may not be sealed yet
            return result
        if time.monotonic() > deadline:
            raise AssertionError("audit rows were not sealed within 60 s")
        time.sleep(0.05)


def test_every_operation_is_audited_with_outcome(tenant: Tenant) -> None:
    with tenant.client() as client:
        p = client.memory.set(scope="user", scope_ref="u1", key="k", value=1)
        client.memory.append(scope="user", scope_ref="u1", key="list", value=1)
        client.memory.get(scope="user", scope_ref="u1", key="k")
        with pytest.raises(memplane.NotFound):
            client.memory.get(scope="user", scope_ref="u1", key="absent")
        client.memory.list_pointers()
        client.memory.delete(scope="user", scope_ref="u1", key="k")
        client.memory.clear(scope="user", scope_ref="u1")
        everything = client.audit.list(limit=1000).items
        entries = [e for e in everything
                   if e.operation not in ("tenant_create", "kek_create", "key_create")]

    # The tenant's first write made its KEK and the user's subject key, each audited.
    assert [(e.operation, e.accessor_id) for e in everything
            if e.operation in ("kek_create", "key_create")] == [
        ("kek_create", "keys"), ("key_create", "keys")]
    assert [(e.operation, e.success) for e in entries] == [
        ("write", True), ("append", True), ("read", True), ("read", False), ("list", True),
        ("delete", True), ("delete", True), ("clear", True),
    ]
    assert entries[0].pointer_id == p.id and entries[2].pointer_id == p.id
    assert "not_found" in entries[3].detail
    assert all(e.accessor_type == "api" and e.request_id for e in entries)
    assert [e.seq for e in entries] == sorted(e.seq for e in entries if e.seq is not None)


def test_audit_rows_never_hold_content(tenant: Tenant) -> None:
    with tenant.client() as client:
        client.memory.set(scope="user", scope_ref="u1", key="k", value="the-secret-content")
        client.memory.get(scope="user", scope_ref="u1", key="k")
        details = " ".join(e.detail for e in client.audit.list().items)
    assert "the-secret-content" not in details


def test_audit_filters(tenant: Tenant) -> None:
    with tenant.client() as client:
        a = client.memory.set(scope="user", scope_ref="u1", key="a", value=1)
        client.memory.set(scope="user", scope_ref="u1", key="b", value=2)
        client.memory.get(scope="user", scope_ref="u1", key="a")
        by_pointer = client.audit.list(pointer_id=a.id).items
        reads = client.audit.list(operation="read").items
        pages = list(client.audit.iter(limit=2))
        everything = client.audit.list(limit=1000).items
    assert [(e.operation, e.pointer_id) for e in by_pointer] == [("write", a.id), ("read", a.id)]
    assert [e.operation for e in reads] == ["read"]
    # Each page query is itself audited; only the last page's row comes after the iteration.
    assert [e.seq for e in pages] == [e.seq for e in everything][:-1]
    assert everything[-1].operation == "audit_query"


@pytest.mark.parametrize("tamper", ["edit", "delete", "reorder", "truncate"])
def test_verify_finds_tampering(tenant: Tenant, tamper: str) -> None:
    with tenant.client() as client:
        for n in range(5):
            client.memory.set(scope="user", scope_ref="u1", key=f"k{n}", value=n)
        before = _wait_sealed(client)
        assert before.ok is True
        rows = [e for e in client.audit.list(limit=1000).items if e.seq is not None]
    target = rows[2].seq
    tid = tenant.id.hex if tenant.stack.engine.dialect.name == "sqlite" else str(tenant.id)
    statements = {
        "edit": ["UPDATE access_logs SET detail = 'nothing happened' "
                 "WHERE tenant_id = :t AND seq = :s"],
        "delete": ["DELETE FROM access_logs WHERE tenant_id = :t AND seq = :s"],
        "reorder": ["UPDATE access_logs SET seq = -1 WHERE tenant_id = :t AND seq = :s",
                    "UPDATE access_logs SET seq = :s WHERE tenant_id = :t AND seq = :s + 1",
                    "UPDATE access_logs SET seq = :s + 1 WHERE tenant_id = :t AND seq = -1"],
        "truncate": ["DELETE FROM access_logs WHERE tenant_id = :t AND seq >= :s"],
    }[tamper]
    with tenant.stack.engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement), {"t": tid, "s": target})
    with tenant.client() as client:
        result = client.audit.verify()
    assert result.ok is False
    assert result.first_bad_seq == target


def test_a_clear_is_audited_even_when_the_scope_is_empty(tenant: Tenant) -> None:
    """I6: every operation leaves a row — a clear of an empty scope too; the scope ref (a
    user id here) stays out of the detail."""
    ref = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.stack.http(tenant.admin_key) as http:
        assert http.put(f"/v1/memories/user/{ref}/k", json={"value": 1}).status_code == 200
        assert http.delete(f"/v1/memories/user/{ref}").json() == {"deleted": 1}
        assert http.delete(f"/v1/memories/user/{ref}").json() == {"deleted": 0}
        deadline = time.monotonic() + 60  # a guard against hanging, not a measurement
        while True:
            rows = http.get("/v1/audit", params={"operation": "clear"}).json()["items"]
            if len(rows) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert [(r["success"], r["detail"]) for r in rows] == [
        (True, "user: 1 deleted"), (True, "user: 0 deleted")]
