"""I5: nothing of tenant A is readable, listable, writable or deletable with B's keys."""

from __future__ import annotations

from tests.support.service import Stack


def test_other_tenant_sees_nothing_on_any_endpoint(stack: Stack) -> None:
    a, b = stack.new_tenant(), stack.new_tenant()
    with a.client() as client_a:
        pointer = client_a.memory.set(scope="user", scope_ref="u1", key="secret", value="A-only")
        client_a.memory.append(scope="user", scope_ref="u1", key="log", value=1)
        key_a = client_a.keys.create(role="agent", name="a-agent")
    with stack.http(a.admin_key) as http:
        pointers_a = {item["id"]: item for item in http.get("/v1/pointers").json()["items"]}
    objects_a = {path: path.read_bytes() for path in a.objects()}
    assert len(pointers_a) == 2 and len(objects_a) == 2

    with stack.http(b.admin_key) as http:
        answers = {
            "get": http.get("/v1/memories/user/u1/secret"),
            "delete": http.delete("/v1/memories/user/u1/secret"),
            "clear": http.delete("/v1/memories/user/u1"),
            "pointers": http.get("/v1/pointers"),
            "pointers by user": http.get("/v1/pointers", params={"user_id": "u1"}),
            "pointers with values": http.get("/v1/pointers", params={"include_values": "true"}),
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
    assert answers["pointers with values"].json()["items"] == []
    assert answers["audit by pointer"].status_code == 200
    assert answers["audit by pointer"].json()["items"] == []
    # B's append and put made B's own two memories, under B's prefix, sharing nothing with A.
    assert answers["append"].status_code == 200 and own.status_code == 200
    with stack.http(b.admin_key) as http:
        pointers_b = {item["id"]: item for item in http.get("/v1/pointers").json()["items"]}
        assert http.get("/v1/memories/user/u1/log").json()["value"] == [2]
        assert http.get("/v1/memories/user/u1/secret").json()["value"] == "B's"
    assert set(pointers_b) == {answers["append"].json()["id"], own.json()["id"]}
    assert not set(pointers_b) & set(pointers_a)
    assert {item["key"] for item in pointers_b.values()} == {"log", "secret"}
    assert all(item["storage_path"].startswith(f"tenants/{b.id}/memories/user/u1/")
               for item in pointers_b.values())
    assert len(b.objects()) == 2
    # A's bucket is byte for byte what it was before B did anything.
    assert {path: path.read_bytes() for path in a.objects()} == objects_a

    with a.client() as client_a:
        assert client_a.memory.get(scope="user", scope_ref="u1", key="secret").value == "A-only"
        assert client_a.memory.get(scope="user", scope_ref="u1", key="log").value == [1]
        with stack.client(key_a.api_key) as agent_a:
            assert agent_a.memory.get(scope="user", scope_ref="u1", key="secret").value == "A-only"
