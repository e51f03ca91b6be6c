"""The SDK tests' canned replies have the shape of what a real server sends.

One real server answer per kind is recorded here (a pointer and an audit row, from an agent
key's write and read) and held against ``pointer_json``/``audit_json`` field by field: the
same field names, the same JSON types, and the same vocabulary where the value is an enum in
all but name. If the server's answer changes, these fixtures must change with it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.service import Stack

from .helpers import audit_json, pointer_json


def _json_type(value: Any) -> str:
    return type(value).__name__


def _shape(data: dict[str, Any]) -> dict[str, str]:
    return {name: _json_type(value) for name, value in data.items()}


@pytest.mark.databases("sqlite")
def test_canned_pointer_and_audit_row_match_a_real_answer(stack: Stack) -> None:
    tenant = stack.new_tenant()
    agent_key = tenant.key("agent")
    with stack.http(agent_key) as http:
        written = http.put("/v1/memories/user/u1/prefs",
                           json={"value": {"tone": "brief"}, "memory_type": "preference",
                                 "title": "Preferences", "tags": ["ui"], "importance": 3,
                                 "user_id": "u1"})
        assert written.status_code == 200, written.text
        read = http.get("/v1/memories/user/u1/prefs")
        assert read.status_code == 200, read.text
    with stack.http(tenant.admin_key) as http:
        rows = http.get("/v1/audit", params={"pointer_id": written.json()["id"]}).json()
    real_pointer = read.json()["pointer"]
    real_read = next(row for row in rows["items"] if row["operation"] == "read")

    canned_pointer, canned_audit = pointer_json(), audit_json()
    # Fields the real answer leaves null are compared by name only; the rest by JSON type.
    assert set(canned_pointer) == set(real_pointer)
    assert {k: t for k, t in _shape(canned_pointer).items() if real_pointer[k] is not None} \
        == {k: t for k, t in _shape(real_pointer).items() if real_pointer[k] is not None}
    assert set(canned_audit) == set(real_read)
    assert {k: t for k, t in _shape(canned_audit).items() if real_read[k] is not None} \
        == {k: t for k, t in _shape(real_read).items() if real_read[k] is not None}
    # Values the server draws from a small vocabulary are ones it really uses.
    for name in ("scope", "memory_type", "source", "sync_status", "importance", "tags",
                 "title", "user_id"):
        assert canned_pointer[name] == real_pointer[name], name
    for name in ("accessor_type", "operation", "success", "detail"):
        assert canned_audit[name] == real_read[name], name
    assert real_read["accessor_id"].startswith("key:")
    assert canned_audit["accessor_id"].startswith("key:")
    assert canned_pointer["storage_path"].rsplit("/", 6)[2:6] \
        == real_pointer["storage_path"].rsplit("/", 6)[2:6] == ["memories", "user", "u1", "prefs"]
