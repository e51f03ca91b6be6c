"""The audit routes' response models (``control_plane/audit/schemas.py``): each model's fields
as served, the defaults a report leaves out, and an entry read straight from an audit row
(``from_attributes``). No database beyond an unsaved row object."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from control_plane.audit.schemas import (
    AuditEntryOut,
    AuditPage,
    AuditVerificationOut,
    ConsistencyProofOut,
    InclusionProofOut,
)
from control_plane.db.models import AccessLog

AT = datetime(2026, 12, 6, 1, 2, 3, tzinfo=UTC)


def test_a_verification_report_gives_every_field_it_leaves_out_its_default() -> None:
    report = AuditVerificationOut(ok=True, checked=3, unsealed=1, first_bad_seq=None)
    assert report.model_dump() == {
        "ok": True, "checked": 3, "unsealed": 1, "first_bad_seq": None, "problem": None,
        "checkpoints_checked": 0, "first_checkpoint_seq": None, "last_checkpoint_seq": None,
        "first_bad_checkpoint": None, "head_seq": 0, "anchored_seq": 0,
        "anchor_lag_seconds": None, "anchor_problem": None, "anchors_checked": 0,
        "anchor_moves": 0, "anchors_unreadable": []}
    other = AuditVerificationOut(ok=False, checked=0, unsealed=0, first_bad_seq=2)
    other.anchors_unreadable.append("sc_1")
    assert report.anchors_unreadable == []  # each report its own list


def test_a_verification_report_takes_every_field() -> None:
    values = {
        "ok": False, "checked": 7, "unsealed": 2, "first_bad_seq": 4, "problem": "row 4",
        "checkpoints_checked": 3, "first_checkpoint_seq": 1, "last_checkpoint_seq": 6,
        "first_bad_checkpoint": 6, "head_seq": 9, "anchored_seq": 6,
        "anchor_lag_seconds": 1.5, "anchor_problem": "unreachable", "anchors_checked": 2,
        "anchor_moves": 1, "anchors_unreadable": ["sc_ab"]}
    assert AuditVerificationOut.model_validate(values).model_dump() == values


def test_an_entry_is_read_straight_from_an_audit_row() -> None:
    tenant, pointer, event = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    row = AccessLog(tenant_id=tenant, seq=5, pointer_id=pointer, event_id=event,
                    accessor_type="agent", accessor_id="key:k", agent_id="bot",
                    operation="read", success=True, detail="d", request_id="req",
                    accessed_at=AT)
    assert AuditEntryOut.model_validate(row).model_dump() == {
        "seq": 5, "pointer_id": pointer, "event_id": event, "accessor_type": "agent",
        "accessor_id": "key:k", "agent_id": "bot", "operation": "read", "success": True,
        "detail": "d", "request_id": "req", "accessed_at": AT, "leaf": None}
    unsealed = AccessLog(tenant_id=tenant, seq=None, pointer_id=None, event_id=None,
                         accessor_type="api", accessor_id="key:a", operation="list",
                         success=False, detail="", request_id=None, accessed_at=AT)
    assert AuditEntryOut.model_validate(unsealed).model_dump() == {
        "seq": None, "pointer_id": None, "event_id": None, "accessor_type": "api",
        "accessor_id": "key:a", "agent_id": None, "operation": "list", "success": False,
        "detail": "", "request_id": None, "accessed_at": AT, "leaf": None}


def test_an_entry_needs_every_field_but_the_agent_and_the_leaf() -> None:
    with pytest.raises(ValidationError) as raised:
        AuditEntryOut.model_validate({})
    assert sorted(str(e["loc"][0]) for e in raised.value.errors()) == [
        "accessed_at", "accessor_id", "accessor_type", "detail", "event_id", "operation",
        "pointer_id", "request_id", "seq", "success"]


def test_a_page_and_the_proofs_as_served() -> None:
    entry = {"seq": 1, "pointer_id": None, "event_id": None, "accessor_type": "api",
             "accessor_id": "key:a", "agent_id": None, "operation": "list", "success": True,
             "detail": "", "request_id": None, "accessed_at": AT, "leaf": "e30="}
    assert AuditPage.model_validate({"items": [entry], "next_cursor": None}).model_dump() == {
        "items": [entry], "next_cursor": None}
    assert AuditPage(items=[], next_cursor="1").model_dump() == {
        "items": [], "next_cursor": "1"}
    assert InclusionProofOut(leaf_index=0, tree_size=2, hashes=["YQ=="]).model_dump() == {
        "leaf_index": 0, "tree_size": 2, "hashes": ["YQ=="]}
    assert ConsistencyProofOut(first=2, second=2, hashes=[]).model_dump() == {
        "first": 2, "second": 2, "hashes": []}
