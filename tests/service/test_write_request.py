"""What step 3 of the write protocol is sent (``memories/write_request.py``): a request's
statement parameters, name by name, its defaults, and that it cannot change once decided.
(``test_hotpath_commit.py`` runs the same parameters through the real statements.)"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

import pytest

from control_plane.addresses import MemoryAddress, Scope
from control_plane.memories.write_request import WriteRequest, address_params

TENANT = uuid.UUID(int=1)
POINTER = uuid.UUID(int=2)
CONFIG = uuid.UUID(int=3)
KEY = uuid.UUID(int=4)
NOW = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)
ADDRESS = MemoryAddress.parse(Scope.user, "ada", "k")


def _request(**changes: object) -> WriteRequest:
    """A request giving only the fields without a default."""
    base = WriteRequest(
        tenant_id=TENANT, address=ADDRESS, pointer_id=POINTER, seen_subject_user="ada",
        guard_user="ada", config_id=CONFIG, path="memories/x.json", sha256="a" * 64, size=7,
        now=NOW, memory_type="note", default_memory_type="preference", tags=["t"],
        importance=4, title="T", meta_user=None, agent_id="ag", expires_at=None,
        accessor_type="key", accessor_id="k-1", operation="write", request_id="req-1")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_an_address_is_named_by_five_parameters() -> None:
    assert address_params(TENANT, ADDRESS) == {
        "v_tenant": TENANT, "v_scope": "user", "v_scope_ref": "ada", "v_key": "k",
        "v_user_ref": "ada"}
    team = MemoryAddress.parse(Scope.team, "ops", "k")
    assert address_params(TENANT, team)["v_user_ref"] is None


def test_a_requests_parameters_name_everything_step_3_sets() -> None:
    request = _request()
    assert (request.accessor_agent_id, request.audit_address, request.key_id,
            request.source, request.searchable, request.existed) == (
        None, "", None, None, None, False)
    assert request.params() == {
        "v_tenant": TENANT, "v_scope": "user", "v_scope_ref": "ada", "v_key": "k",
        "v_user_ref": "ada", "v_pointer_id": POINTER, "v_seen_user": "ada",
        "v_guard_user": "ada", "v_config": CONFIG, "v_path": "memories/x.json",
        "v_sha": "a" * 64, "v_size": 7, "v_now": NOW, "v_memory_type": "note",
        "v_default_type": "preference", "v_tags": ["t"], "v_importance": 4, "v_title": "T",
        "v_meta_user": None, "v_agent_id": "ag", "v_expires_at": None,
        "v_accessor_type": "key", "v_accessor_id": "k-1", "v_operation": "write",
        "v_request_id": "req-1", "v_accessor_agent": None, "v_detail_head": "user v",
        "v_detail_tail": " 7 bytes", "v_key_id": None, "v_source": None,
        "v_searchable": None, "v_new_searchable": True, "v_existed": False}
    given = _request(accessor_agent_id="agent-7", audit_address=" sealed:x", key_id=KEY,
                     source="chat", searchable=True, existed=True).params()
    assert {name: given[name] for name in (
        "v_accessor_agent", "v_detail_tail", "v_key_id", "v_source", "v_searchable",
        "v_new_searchable", "v_existed")} == {
        "v_accessor_agent": "agent-7", "v_detail_tail": " 7 bytes sealed:x", "v_key_id": KEY,
        "v_source": "chat", "v_searchable": True, "v_new_searchable": True,
        "v_existed": True}
    hidden = _request(searchable=False).params()
    assert (hidden["v_searchable"], hidden["v_new_searchable"]) == (False, False)


def test_a_request_cannot_change_once_decided() -> None:
    request = _request()
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.size = 8  # type: ignore[misc]
    assert request.size == 7
