"""The audit tree's leaf of a row (``control_plane/audit/leaves.py``), the cases the
property tests of ``tests/audit_tree/test_leaves.py`` leave open: a time without a zone (as
SQLite returns ``accessed_at``) is UTC whatever the server's local zone, a time in another
zone is shown in UTC, the sealer's ``seq`` stands in for the row's, and an unsealed row has no
leaf."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from control_plane.audit.leaves import fields, leaf_bytes, timestamp

KNOWN = (b'{"accessed_at":"2026-12-05T13:42:25.120000Z","accessor_id":"key:k1",'
         b'"accessor_type":"api","agent_id":"a1","detail":"d",'
         b'"event_id":null,"operation":"read",'
         b'"pointer_id":"00000000-0000-0000-0000-000000000002","request_id":"r1","seq":%d,'
         b'"success":false,"tenant_id":"01234567-89ab-cdef-0123-456789abcdef"}')


def _row(**changes: Any) -> SimpleNamespace:
    values: dict[str, Any] = dict(
        tenant_id=uuid.UUID("01234567-89ab-cdef-0123-456789abcdef"), seq=7,
        pointer_id=uuid.UUID(int=2), event_id=None, accessor_type="api",
        accessor_id="key:k1", agent_id="a1", operation="read", success=False, detail="d",
        request_id="r1", accessed_at=datetime(2026, 12, 5, 13, 42, 25, 120000, tzinfo=UTC))
    values.update(changes)
    return SimpleNamespace(**values)


@pytest.fixture
def far_local_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone five hours west of UTC (a naive time converted as local
    time would move)."""
    monkeypatch.setenv("TZ", "EST+05")
    time.tzset()
    assert time.timezone == 5 * 3600
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_time_without_a_zone_is_utc_whatever_the_local_zone(far_local_zone: None) -> None:
    naive = datetime(2026, 12, 5, 13, 42, 25, 120000)
    assert timestamp(naive) == "2026-12-05T13:42:25.120000Z"
    assert timestamp(naive.replace(microsecond=0)) == "2026-12-05T13:42:25Z"
    row = _row(accessed_at=naive)
    assert leaf_bytes(row) == KNOWN % 7
    assert fields(row)["accessed_at"] == "2026-12-05T13:42:25.120000Z"


def test_a_time_in_another_zone_is_shown_in_utc(far_local_zone: None) -> None:
    east = datetime(2026, 12, 5, 15, 42, 25, 120000, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp(east) == "2026-12-05T13:42:25.120000Z"
    assert leaf_bytes(_row(accessed_at=east)) == KNOWN % 7
    assert timestamp(datetime(2026, 12, 5, 13, 42, 25, tzinfo=UTC)) == "2026-12-05T13:42:25Z"


def test_the_sealers_seq_stands_in_for_the_rows() -> None:
    assert leaf_bytes(_row()) == KNOWN % 7
    assert leaf_bytes(_row(), 9) == KNOWN % 9
    assert leaf_bytes(_row(seq=None), 12) == KNOWN % 12
    assert fields(_row())["seq"] == 7
    assert fields(_row(), 9)["seq"] == 9
    assert fields(_row(seq=None), 12)["seq"] == 12


@pytest.mark.parametrize("seq", [None, "7", 7.0, True])
def test_a_row_without_an_integer_seq_has_no_leaf(seq: object) -> None:
    with pytest.raises(ValueError) as raised:
        leaf_bytes(_row(seq=seq))
    assert str(raised.value) == "an unsealed row has no leaf"
    if seq is not None:
        with pytest.raises(ValueError):
            leaf_bytes(_row(), seq)  # type: ignore[arg-type]


def test_the_fields_of_a_known_row() -> None:
    assert fields(_row(event_id=uuid.UUID(int=1), pointer_id=None, success=1)) == {
        "accessed_at": "2026-12-05T13:42:25.120000Z", "accessor_id": "key:k1",
        "accessor_type": "api", "agent_id": "a1", "detail": "d",
        "event_id": "00000000-0000-0000-0000-000000000001", "operation": "read",
        "pointer_id": None, "request_id": "r1", "seq": 7, "success": True,
        "tenant_id": "01234567-89ab-cdef-0123-456789abcdef"}
