"""I5: nothing of tenant A is readable, listable, writable or deletable with B's keys."""

from __future__ import annotations

from tests.support.service import Stack


def test_other_tenant_sees_nothing_on_any_endpoint(stack: Stack) -> None:
    a, b = stack.new_tenant(), stack.new_tenant()
    with a.client() as client_a:
        pointer = client_a.memory.set(scope="user", scope_ref="u1", key="secret", value="A-only")
        client_a.memory.append(scope="user", scope_ref="u1", key="log", value=1)
        key_a = client_a.keys.create(role="agent", name="a-agent")

    with stack.http(b.admin_key) as http:
        answers = {
            "get": http.get("/v1/memories/user/u1/secret"),
            "delete": http.delete("/v1/memories/user/u1/secret"),
            "clear": http.delete("/v1/memories/user/u1"),
            "pointers": http.get("/v1/pointers"),
            "pointers by user": http.get("/v1/pointers", params={"user_id": "u1"}),
            "audit by pointer": http.get("/v1/audit", params={"pointer_id": str(pointer.id)}),
            "revoke A's key": http.delete(f"/v1/api-keys/{key_a.id}"),
            "append": http.post("/v1/memories/user/u1/log/append", json={"value": 2}),
        }
        # B writing the same address creates B's own memory, never touching A's.
        own = http.put("/v1/memories/user/u1/secret", json={"value": "B's"})

    assert answers["get"].status_code == 404
    assert answers["delete"].status_code == 404
    assert answers["revoke A's key"].status_code == 404
    assert answers["clear"].json() == {"deleted": 0}
    assert answers["pointers"].json()["items"] == []
    assert answers["pointers by user"].json()["items"] == []
    audit_items = answers["audit by pointer"].json()["items"]
    assert audit_items == []
    assert answers["append"].status_code == 200
    assert answers["append"].json()["id"] != pointer.id
    assert own.status_code == 200 and own.json()["id"] != str(pointer.id)
    assert not own.json()["storage_path"].startswith(f"tenants/{a.id}/")

    with a.client() as client_a:
        assert client_a.memory.get(scope="user", scope_ref="u1", key="secret").value == "A-only"
        assert client_a.memory.get(scope="user", scope_ref="u1", key="log").value == [1]
        with stack.client(key_a.api_key) as agent_a:
            assert agent_a.memory.get(scope="user", scope_ref="u1", key="secret").value == "A-only"
