"""The audit chain's hashed form, pinned: every sealed row in every database (and every chain
head anchored in a customer's bucket) was hashed over these bytes, so a change to them breaks
``verify`` for all of them. Vectors first, then the edges the property tests rarely draw."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from control_plane.audit import chain
from control_plane.audit import service as audit
from control_plane.audit.leaves import leaf_bytes
from control_plane.db.base import Base
from control_plane.db.models import AccessLog, Tenant
from control_plane.identity import Actor

TENANT = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")


def _first() -> SimpleNamespace:
    return SimpleNamespace(
        tenant_id=TENANT, seq=1, pointer_id=None, event_id=uuid.UUID(int=1),
        accessor_type="api", accessor_id="key:k1", operation="write", success=True,
        detail='user: "ü"\n', request_id=None, agent_id=None,
        accessed_at=datetime(2026, 12, 5, 13, 42, 25, 120000, tzinfo=UTC))


def _second() -> SimpleNamespace:
    return SimpleNamespace(
        tenant_id=TENANT, seq=2, pointer_id=uuid.UUID(int=2), event_id=None,
        accessor_type="agent", accessor_id="key:k2", operation="read", success=False,
        detail="", request_id="req-1", agent_id="agent-é",
        accessed_at=datetime(2026, 12, 5, 13, 42, 26, 7, tzinfo=UTC))


def _by_json(row: Any) -> bytes:
    """The form as first defined (``json.dumps`` of the fields, ``strftime`` for the time)."""
    fields = [str(row.tenant_id), row.seq, str(row.pointer_id) if row.pointer_id else None,
              str(row.event_id) if row.event_id else None, row.accessor_type, row.accessor_id,
              row.operation, bool(row.success), row.detail, row.request_id,
              row.accessed_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")]
    if row.agent_id is not None:
        fields.append(row.agent_id)
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


def test_the_chain_starts_from_sixty_four_zeros() -> None:
    assert chain.GENESIS == "0" * 64
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    try:
        with Session(engine, expire_on_commit=False) as session:
            tenant = Tenant(name="t")
            session.add(tenant)
            session.flush()
            audit.create_head(session, tenant.id)
            audit.record(session, Actor(tenant.id, "api", "k"), "write", detail="first")
            session.commit()
            assert audit.seal(session, tenant.id) == 1
            row = session.scalars(select(AccessLog).where(AccessLog.tenant_id == tenant.id)).one()
            assert row.prev_hash == "0" * 64
            assert row.row_hash == hashlib.sha256(b"0" * 64 + chain.canonical(row)).hexdigest()
            assert audit.verify(session, tenant.id).ok is True
    finally:
        engine.dispose()


def test_a_known_chain_of_two_rows_hashes_to_its_pinned_values() -> None:
    first, second = _first(), _second()
    assert chain.canonical(first) == (
        b'["01234567-89ab-cdef-0123-456789abcdef",1,null,'
        b'"00000000-0000-0000-0000-000000000001","api","key:k1","write",true,'
        b'"user: \\"\xc3\xbc\\"\\n",null,"2026-12-05T13:42:25.120000Z"]')
    assert chain.canonical(second) == (
        b'["01234567-89ab-cdef-0123-456789abcdef",2,"00000000-0000-0000-0000-000000000002",'
        b'null,"agent","key:k2","read",false,"","req-1","2026-12-05T13:42:26.000007Z",'
        b'"agent-\xc3\xa9"]')
    head = chain.chain_hash(chain.GENESIS, first)
    assert head == "714d7c1be383411d894ccdee543cbc9ff498636d37efba39537c346d2ea35738"
    assert head == hashlib.sha256(b"0" * 64 + chain.canonical(first)).hexdigest()
    assert chain.chain_hash(head, second) == hashlib.sha256(
        head.encode() + chain.canonical(second)).hexdigest()


def test_the_sealers_seq_stands_in_for_the_rows_own() -> None:
    row = _first()
    row.seq = None  # an unsealed row
    assert chain.canonical(row, 41).startswith(b'["01234567-89ab-cdef-0123-456789abcdef",41,')
    assert chain.canonical(row).startswith(b'["01234567-89ab-cdef-0123-456789abcdef",null,')
    assert chain.sealed_forms(row, 41)[0] == chain.canonical(row, 41)


class _Operation(StrEnum):
    ERASE = "löschen"


class _Text(str):
    pass


class _Seq(int):
    pass


def test_a_string_subclass_is_written_as_json_dumps_writes_it_unescaped() -> None:
    """A ``str`` subclass (an enum's member, a driver's own text type) takes json.dumps's
    path: it must keep non-ASCII characters as they are, as the plain ``str`` path does."""
    row = _first()
    row.operation, row.detail, row.agent_id = _Operation.ERASE, _Text("ü\u2028"), _Text("é")
    assert chain.canonical(row) == _by_json(row)
    assert b'"l\xc3\xb6schen"' in chain.canonical(row)
    assert chain.canonical(row).endswith(b',"\xc3\xa9"]')


def test_an_int_subclass_seq_is_written_as_json_dumps_writes_it() -> None:
    row = _first()
    row.seq = None
    assert chain.canonical(row, _Seq(41)) == chain.canonical(row, 41)
    row.seq = _Seq(41)
    assert chain.canonical(row) == _by_json(row)
    assert chain.canonical(row).startswith(b'["01234567-89ab-cdef-0123-456789abcdef",41,')


@pytest.mark.parametrize("year", [1, 999, 1000, 1001])
@pytest.mark.parametrize("tz", [UTC, timezone(timedelta(hours=-5)), None],
                         ids=["utc", "minus5", "naive"])
@pytest.mark.parametrize("micro", [0, 7])
def test_times_around_the_four_digit_year_hash_as_strftime_writes_them(
        year: int, tz: timezone | None, micro: int) -> None:
    """``strftime`` and ``isoformat`` agree from the year 1000 on; below it only strftime is
    the form rows were hashed over (it may not pad the year, isoformat does)."""
    row = _first()
    row.accessed_at = datetime(year, 1, 2, 3, 4, 5, micro, tzinfo=tz)
    assert chain.canonical(row) == _by_json(row)
    assert chain.sealed_forms(row, row.seq) == (chain.canonical(row), leaf_bytes(row))
