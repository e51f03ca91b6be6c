"""Step 3 of the fast write path (``memories/write_fast._commit_fast`` and ``settle_fast``)
when it does not simply land: a commit that loses its connection (the object stays: the
statement may have committed), one that fails otherwise (the object goes), and an erasure of
the subject that began between the put and the commit (409 from step 3 itself, no object
left, no second lookup)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id, utcnow
from control_plane.db.engine import begin_write
from control_plane.db.models import MemoryPointer, SubjectErasure
from control_plane.errors import SubjectErasureInProgress
from control_plane.memories import hotpath_commit
from tests.support.service import ServiceWorld


def _rows(world: ServiceWorld) -> list[tuple[object, ...]]:
    with world.runtime.sessions() as session:
        return [tuple(r) for r in session.execute(
            select(MemoryPointer.id, MemoryPointer.version, MemoryPointer.storage_path)
            .where(MemoryPointer.tenant_id == world.tenant_id)).all()]


def _failing_commit(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def fails(session: Any, request: Any) -> hotpath_commit.WriteOutcome:
        raise error

    monkeypatch.setattr(hotpath_commit, "commit_write", fails)


def test_a_commit_that_loses_its_connection_raises_that_error_and_keeps_its_object(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(address, 1)
    rows, before = _rows(world), world.objects()
    lost = sa_exc.OperationalError("UPDATE memory_pointers", {},
                                   ConnectionError("server closed the connection"))
    _failing_commit(monkeypatch, lost)
    with pytest.raises(sa_exc.OperationalError) as raised:
        world.write(address, 2)
    assert raised.value is lost
    assert len(world.objects() - before) == 1  # the row may name it: reconcile decides
    assert _rows(world) == rows
    monkeypatch.undo()
    assert world.read(address) == 1


def test_a_commit_that_fails_otherwise_raises_that_error_and_leaves_no_object(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(address, 1)
    rows, before = _rows(world), world.objects()
    broken = RuntimeError("the statement failed")
    _failing_commit(monkeypatch, broken)
    with pytest.raises(RuntimeError) as raised:
        world.write(address, 2)
    assert raised.value is broken
    assert (world.objects(), _rows(world)) == (before, rows)
    monkeypatch.undo()
    assert world.read(address) == 1


def test_an_erasure_begun_after_the_put_is_refused_by_step_3_and_leaves_no_object(
        world: ServiceWorld, lookups: list[MemoryAddress]) -> None:
    address = MemoryAddress.parse(Scope.user, "ada", "a")
    world.write(address, 1)
    lookups.clear()
    rows, before = _rows(world), world.objects()
    job = new_id()
    begun: list[str] = []

    def erasure_begins(step: str) -> None:
        if step != "write:after_put" or begun:
            return
        begun.append(step)
        with world.runtime.sessions() as session:
            begin_write(session)
            session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="ada", job_id=job,
                                       started_at=utcnow()))
            session.commit()

    world.runtime.plane.checkpoint = erasure_begins
    try:
        with pytest.raises(SubjectErasureInProgress) as refused:
            world.write(address, 2)
    finally:
        world.runtime.plane.checkpoint = world.checkpoint
    assert refused.value.extra == {"job_id": str(job)}
    assert (begun, lookups) == (["write:after_put"], [])  # refused by the commit itself
    assert (world.objects(), _rows(world)) == (before, rows)
