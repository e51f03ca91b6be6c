"""The audit chain detects any edited, deleted or reordered row (property tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, delete, select, update
from sqlalchemy.orm import Session

from control_plane.audit import chain
from control_plane.audit import service as audit
from control_plane.db.base import Base
from control_plane.db.models import AccessLog, Tenant
from control_plane.identity import Actor


@pytest.fixture(scope="module")
def engine() -> Iterator[object]:
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    yield engine
    engine.dispose()


def _tenant_with_rows(session: Session, n: int) -> uuid.UUID:
    tenant = Tenant(name="t")
    session.add(tenant)
    session.flush()
    audit.create_head(session, tenant.id)
    actor = Actor(tenant.id, "api", "k")
    for i in range(n):
        audit.record(session, actor, "write", detail=f"row {i}")
    session.commit()
    assert audit.seal(session, tenant.id) == n
    return tenant.id


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 30), data=st.data(),
       tamper=st.sampled_from(["edit", "delete", "swap", "drop_tail"]))
def test_any_tampering_is_found_at_its_row(engine, n: int, data: st.DataObject,  # type: ignore[no-untyped-def]
                                           tamper: str) -> None:
    with Session(engine, expire_on_commit=False) as session:
        tenant_id = _tenant_with_rows(session, n)
        assert audit.verify(session, tenant_id).ok is True
        seq = data.draw(st.integers(1, n - 1))
        where = (AccessLog.tenant_id == tenant_id, AccessLog.seq == seq)
        if tamper == "edit":
            session.execute(update(AccessLog).where(*where).values(operation="read"))
        elif tamper == "delete":
            session.execute(delete(AccessLog).where(*where))
        elif tamper == "swap":
            nxt = (AccessLog.tenant_id == tenant_id, AccessLog.seq == seq + 1)
            session.execute(update(AccessLog).where(*where).values(seq=-1))
            session.execute(update(AccessLog).where(*nxt).values(seq=seq))
            session.execute(update(AccessLog).where(AccessLog.tenant_id == tenant_id,
                                                    AccessLog.seq == -1).values(seq=seq + 1))
        else:
            session.execute(delete(AccessLog).where(AccessLog.tenant_id == tenant_id,
                                                    AccessLog.seq >= seq))
        session.commit()
        result = audit.verify(session, tenant_id)
    assert result.ok is False
    assert result.first_bad_seq == seq
    assert result.problem


def test_rows_written_after_sealing_are_reported_unsealed(engine) -> None:  # type: ignore[no-untyped-def]
    with Session(engine, expire_on_commit=False) as session:
        tenant_id = _tenant_with_rows(session, 3)
        audit.record(session, Actor(tenant_id, "api", "k"), "read")
        session.commit()
        before = audit.verify(session, tenant_id)
        audit.seal(session, tenant_id)
        after = audit.verify(session, tenant_id)
        seqs = list(session.scalars(select(AccessLog.seq).where(AccessLog.tenant_id == tenant_id)
                                    .order_by(AccessLog.seq)))
    assert (before.ok, before.checked, before.unsealed) == (True, 3, 1)
    assert (after.ok, after.checked, after.unsealed) == (True, 4, 0)
    assert seqs == [1, 2, 3, 4]


def _canonical_by_json(row: object, seq: int | None = None) -> bytes:
    """The chain's hashed form as first defined: ``json.dumps`` of the row's fields. Every
    row sealed since is hashed over these bytes, so they must never change."""
    import json

    r: Any = row
    fields = [
        str(r.tenant_id), r.seq if seq is None else seq,
        str(r.pointer_id) if r.pointer_id else None,
        str(r.event_id) if r.event_id else None, r.accessor_type, r.accessor_id,
        r.operation, bool(r.success), r.detail, r.request_id,
        r.accessed_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    ]
    if r.agent_id is not None:
        fields.append(r.agent_id)
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)  # quotes, controls, emoji, ...


@settings(max_examples=400, deadline=None)
@given(tenant_id=st.uuids(), seq=st.one_of(st.none(), st.integers(0, 2**62)),
       pointer_id=st.one_of(st.none(), st.uuids()), event_id=st.one_of(st.none(), st.uuids()),
       accessor_type=_TEXT, accessor_id=_TEXT, operation=_TEXT, success=st.booleans(),
       detail=st.one_of(st.none(), _TEXT), request_id=st.one_of(st.none(), _TEXT),
       accessed_at=st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
       agent_id=st.one_of(st.none(), _TEXT), given_seq=st.one_of(st.none(), st.integers(1, 10**9)))
def test_the_hashed_form_is_json_dumps_of_the_fields_byte_for_byte(
        given_seq: int | None, **columns: Any) -> None:
    from types import SimpleNamespace

    row = SimpleNamespace(**columns)

    assert chain.canonical(row, given_seq) == _canonical_by_json(row, given_seq)
