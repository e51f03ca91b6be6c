"""The entries service without HTTP, on SQLite and PostgreSQL: the compactor's contract
(``source_override``, ``pointer_id``, ``extra`` in the committing transaction), crashes at
each step of the write, replace and delete protocols."""

from __future__ import annotations

import hashlib
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control_plane.db.base import new_id, utcnow
from control_plane.db.models import AccessLog, Compaction, EntryTerm, MemoryPointer
from control_plane.entries import service as entries
from control_plane.entries.schemas import EntryIn, EntryUpdate
from control_plane.errors import NotFound
from control_plane.integrity.reconcile import mark_orphans, reconcile, sweep_orphans
from tests.support.crypto import plaintext_of
from tests.support.service import ServiceWorld, SimulatedCrash

SPEC = EntryIn(scope="entity", scope_ref="ent_acme", title="Acme decisions",
               summary="Acme chose a ROAS target of 4.", tags=["decision"])


class ExtraFailed(Exception):
    pass


def _create(world: ServiceWorld, spec: EntryIn = SPEC, **kwargs: Any) -> MemoryPointer:
    with world.runtime.sessions() as session:
        result = entries.create_entry(session, world.runtime.plane, world.actor, spec,
                                      **kwargs)
    assert isinstance(result, MemoryPointer)
    return result


def _count(world: ServiceWorld, model: Any, *where: Any) -> int:
    with world.runtime.sessions() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where)) or 0


def _pointers(world: ServiceWorld) -> list[MemoryPointer]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(MemoryPointer)
                                    .where(MemoryPointer.tenant_id == world.tenant_id)))




def _terms(world: ServiceWorld) -> int:
    return _count(world, EntryTerm, EntryTerm.tenant_id == world.tenant_id)


def _settle(world: ServiceWorld) -> None:
    """Reconciler and both phases of orphan GC: the bucket ends holding what pointers name."""
    with world.runtime.sessions() as session:
        assert reconcile(session, world.runtime.plane, grace_seconds=0,
                         tenant_id=world.tenant_id).errors == []
        mark_orphans(session, world.runtime.plane, grace_seconds=0, tenant_id=world.tenant_id)
        sweep_orphans(session, world.runtime.plane, grace_seconds=0, tenant_id=world.tenant_id)
    assert world.objects() == {p.storage_path for p in _pointers(world)}


def test_source_override_pointer_id_and_extra_commit_together(world: ServiceWorld) -> None:
    chosen = new_id()
    seen: list[tuple[uuid.UUID, bool]] = []

    def extra(session: Session, pointer: MemoryPointer) -> None:
        # In the pointer's own transaction: the row is visible here, not yet committed.
        seen.append((pointer.id, session.get(MemoryPointer, pointer.id) is pointer))
        session.add(Compaction(id=pointer.id, tenant_id=world.tenant_id, scope_type="entity",
                               scope_ref="ent_acme", provider="extractive", model="offline",
                               prompt_version="v1", event_count=3, created_at=utcnow()))

    spec = SPEC.model_copy(update={"importance": 4})
    pointer = _create(world, spec, source_override="compactor", pointer_id=chosen,
                      extra=extra)

    assert seen == [(chosen, True)]
    assert (pointer.id, pointer.source, pointer.importance) == (chosen, "compactor", 4)
    assert (pointer.key, pointer.memory_type, pointer.sync_status) == (None, "entry", "synced")
    assert _count(world, Compaction, Compaction.id == chosen) == 1
    with world.runtime.sessions() as session:
        read = entries.get_entry(session, world.runtime.plane, world.actor, chosen)
    assert (read.summary, read.pointer.source) == ("Acme chose a ROAS target of 4.",
                                                   "compactor")
    assert _terms(world) == 8  # acme, decisions, chose, a, roas, target, of, 4


def test_extra_raising_commits_nothing(world: ServiceWorld) -> None:
    def extra(session: Session, pointer: MemoryPointer) -> None:
        session.add(Compaction(id=pointer.id, tenant_id=world.tenant_id, scope_type="entity",
                               scope_ref="ent_acme", provider="p", model="m",
                               prompt_version="v1", event_count=3, created_at=utcnow()))
        session.flush()
        raise ExtraFailed("the compactor's marking failed")

    with world.runtime.sessions() as session, pytest.raises(ExtraFailed):
        entries.create_entry(session, world.runtime.plane, world.actor, SPEC,
                             source_override="compactor", extra=extra)

    assert _pointers(world) == []
    assert _terms(world) == 0
    assert _count(world, Compaction, Compaction.tenant_id == world.tenant_id) == 0
    assert world.objects() == set()  # the object just put was removed (GC would otherwise)
    failures = _count(world, AccessLog, AccessLog.tenant_id == world.tenant_id,
                      AccessLog.operation == "write", AccessLog.success.is_(False))
    assert failures == 1


def test_a_taken_pointer_id_is_a_conflict_and_leaves_the_first(world: ServiceWorld) -> None:
    first = _create(world)
    with world.runtime.sessions() as session, pytest.raises(Exception) as caught:
        entries.create_entry(session, world.runtime.plane, world.actor, SPEC,
                             pointer_id=first.id)
    assert getattr(caught.value, "status_code", None) == 409
    assert [p.id for p in _pointers(world)] == [first.id]
    assert world.objects() == {first.storage_path}


@pytest.mark.parametrize("step, exists", [
    ("entry:after_put", False),        # the object is an orphan; no pointer, no terms
    ("entry:before_commit", False),    # the transaction never committed
])
def test_crash_during_create_leaves_no_pointer_and_no_terms(
        world: ServiceWorld, step: str, exists: bool) -> None:
    world.crash_at = step
    with pytest.raises(SimulatedCrash):
        _create(world)
    assert (len(_pointers(world)) == 1) is exists
    assert _terms(world) == 0
    _settle(world)
    assert world.objects() == set()


@pytest.mark.parametrize("step, version", [
    ("entry:after_put", 1), ("entry:before_commit", 1), ("write:after_commit", 2)])
def test_crash_during_replace_keeps_pointer_truth(world: ServiceWorld, step: str,
                                                  version: int) -> None:
    first = _create(world)
    world.crash_at = step
    update = EntryUpdate(title="Acme renewal", summary="Renewal signed.")
    with world.runtime.sessions() as session, pytest.raises(SimulatedCrash):
        entries.update_entry(session, world.runtime.plane, world.actor, first.id, update)
    (pointer,) = _pointers(world)
    assert pointer.version == version
    data = plaintext_of(world.runtime, pointer)
    assert hashlib.sha256(data).hexdigest() == pointer.content_sha256  # I1
    _settle(world)
    with world.runtime.sessions() as session:
        read = entries.get_entry(session, world.runtime.plane, world.actor, first.id)
        found, _ = entries.list_entries(session, world.runtime.plane, world.actor,
                                        search="renewal")
    expected = "Renewal signed." if version == 2 else SPEC.summary
    assert read.summary == expected
    assert [i.pointer.id for i in found] == ([first.id] if version == 2 else [])


@pytest.mark.parametrize("step", ["delete:after_mark", "delete:after_object"])
def test_crash_during_delete_is_finished_by_the_reconciler(world: ServiceWorld,
                                                           step: str) -> None:
    first = _create(world)
    world.crash_at = step
    with world.runtime.sessions() as session, pytest.raises(SimulatedCrash):
        entries.delete_entry(session, world.runtime.plane, world.actor, first.id)
    with world.runtime.sessions() as session, pytest.raises(NotFound):
        entries.get_entry(session, world.runtime.plane, world.actor, first.id)
    with world.runtime.sessions() as session:
        listed, _ = entries.list_entries(session, world.runtime.plane, world.actor)
    assert listed == []
    _settle(world)
    assert _pointers(world) == []
    assert _terms(world) == 0  # the row's terms went with it (the foreign key cascades)


def test_concurrent_replaces_leave_one_object_and_the_last_writers_terms(
        world: ServiceWorld) -> None:
    first = _create(world)
    writers = 6
    barrier = threading.Barrier(writers)

    def replace(n: int) -> None:
        update = EntryUpdate(title=f"title{n}", summary=f"summary{n} shared")
        with world.runtime.sessions() as session:
            barrier.wait()
            entries.update_entry(session, world.runtime.plane, world.actor, first.id, update)

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(replace, range(writers)))

    (pointer,) = _pointers(world)
    assert pointer.version == writers + 1
    assert world.objects() == {pointer.storage_path}  # every superseded object deleted
    winner = pointer.title
    assert winner is not None
    n = winner.removeprefix("title")
    with world.runtime.sessions() as session:
        read = entries.get_entry(session, world.runtime.plane, world.actor, first.id)
        hits = [[i.pointer.id for i in entries.list_entries(
            session, world.runtime.plane, world.actor, search=query)[0]]
            for query in (f"title{n} summary{n}", "shared", "roas")]
    assert read.summary == f"summary{n} shared"
    assert hits == [[first.id], [first.id], []]
    assert _terms(world) == 3  # title<n>, summary<n>, shared: the last writer's words only
