"""A row's leaf: the canonical JSON object ``json.dumps`` writes for its fields, with the
values in the form ``GET /v1/audit`` shows them; the sealer's fast path makes the same bytes
(and the chain's form unchanged)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.audit.chain import canonical, sealed_forms
from control_plane.audit.leaves import fields, leaf_bytes
from control_plane.audit.schemas import AuditEntryOut

_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)  # quotes, controls, emoji, ...
_ROW = dict(
    tenant_id=st.uuids(), seq=st.integers(1, 2**62), pointer_id=st.one_of(st.none(), st.uuids()),
    event_id=st.one_of(st.none(), st.uuids()), accessor_type=_TEXT, accessor_id=_TEXT,
    operation=_TEXT, success=st.booleans(), detail=_TEXT,
    request_id=st.one_of(st.none(), _TEXT), agent_id=st.one_of(st.none(), _TEXT),
    accessed_at=st.one_of(
        st.datetimes(timezones=st.just(UTC)),
        st.datetimes(timezones=st.just(UTC)).map(lambda t: t.replace(microsecond=0)),
        st.datetimes(timezones=st.one_of(st.none(), st.timezones()))))


@settings(max_examples=400, deadline=None)
@given(**_ROW)
def test_the_leaf_is_json_dumps_of_the_fields_as_the_api_shows_them(**columns: Any) -> None:
    row = SimpleNamespace(**columns)
    leaf = leaf_bytes(row)
    assert leaf == json.dumps(fields(row), sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False).encode()
    assert json.loads(leaf) == fields(row)
    if row.accessed_at.tzinfo is UTC:  # every stored time is in UTC; the API shows it so
        shown = AuditEntryOut.model_validate(row).model_dump(mode="json")
        mine = fields(row)
        assert mine.pop("tenant_id") == str(row.tenant_id)
        assert mine == {k: v for k, v in shown.items() if k != "leaf"}


@settings(max_examples=400, deadline=None)
@given(**_ROW)
def test_the_sealers_fast_path_makes_the_same_bytes(**columns: Any) -> None:
    row = SimpleNamespace(**columns)
    assert sealed_forms(row, row.seq) == (canonical(row), leaf_bytes(row))


def test_a_known_leaf() -> None:
    row = SimpleNamespace(
        tenant_id=uuid.UUID("01234567-89ab-cdef-0123-456789abcdef"), seq=7,
        pointer_id=None, event_id=uuid.UUID(int=1), accessor_type="api",
        accessor_id="key:k1", agent_id=None, operation="write", success=True,
        detail='user: "ü"\n', request_id=None,
        accessed_at=datetime(2026, 12, 5, 13, 42, 25, 120000, tzinfo=UTC))
    assert leaf_bytes(row) == (
        b'{"accessed_at":"2026-12-05T13:42:25.120000Z","accessor_id":"key:k1",'
        b'"accessor_type":"api","agent_id":null,"detail":"user: \\"\xc3\xbc\\"\\n",'
        b'"event_id":"00000000-0000-0000-0000-000000000001","operation":"write",'
        b'"pointer_id":null,"request_id":null,"seq":7,"success":true,'
        b'"tenant_id":"01234567-89ab-cdef-0123-456789abcdef"}')
    row.accessed_at = row.accessed_at.replace(microsecond=0)
    assert b'"accessed_at":"2026-12-05T13:42:25Z"' in leaf_bytes(row)
