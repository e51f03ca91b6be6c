"""Legal holds through the services, on SQLite and PostgreSQL: retention and deletes pass
over held items and say so, an erasure of a held subject is refused with a sentence naming
the hold, lifting is audited, and a lifted hold keeps no clear subject id."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import service as compliance
from control_plane.db.models import AccessLog, Job, LegalHold
from control_plane.entries import service as entries
from control_plane.entries.schemas import EntryIn
from control_plane.errors import Conflict
from control_plane.holds.service import LegalHoldActive
from control_plane.keys.pseudonyms import pseudonym
from control_plane.memories import service as memories
from tests.retention.helpers import deletes, hold, lift, objects, pointers, policy, put, run
from tests.support.clock import ManualWallClock
from tests.support.service import ServiceWorld


def _rows(world: ServiceWorld, operation: str) -> list[AccessLog]:
    with world.runtime.sessions() as session:
        return list(session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == operation)
            .order_by(AccessLog.id)))


def _hold_row(world: ServiceWorld, hold_id: str) -> LegalHold:
    with world.runtime.sessions() as session:
        found = session.get(LegalHold, hold_id)
    assert found is not None
    return found


def test_retention_skips_a_held_subject_until_the_hold_is_lifted(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    policy(world, scope="user", retention_days=30, auto_delete=True)
    put(world, "user", "u-held", "a")
    put(world, "entity", "ent_acme", "about-held", user_id="u-held")
    put(world, "user", "u-free", "b")
    hold_id = hold(world, user_id="u-held", reason="litigation")
    clock.advance(31 * 86400)

    result = run(world, clock())
    # the scope policy covers the user scope only: the entity memory is not governed
    assert (result["policies"][0]["deleted"], result["policies"][0]["held"]) == (1, 1)
    assert set(pointers(world)) == {"a", "about-held"}

    lift(world, hold_id)
    result = run(world, clock())
    assert (result["policies"][0]["deleted"], result["policies"][0]["held"]) == (1, 0)
    assert set(pointers(world)) == {"about-held"}


def test_a_delete_of_a_held_memory_or_entry_answers_409_naming_the_hold(
        world: ServiceWorld) -> None:
    pointer = put(world, "user", "u-held", "k")
    with world.runtime.sessions() as session:
        entry = entries.create_entry(session, world.runtime.plane, world.actor, EntryIn(
            scope=Scope.user, scope_ref="u-held", title="t", summary="s"))
    hold_id = hold(world, scope="user", scope_ref="u-held", reason="investigation")

    with world.runtime.sessions() as session, pytest.raises(LegalHoldActive) as refused:
        memories.delete_value(session, world.runtime.plane, world.actor,
                              MemoryAddress.parse(Scope.user, "u-held", "k"))
    assert refused.value.status_code == 409
    assert refused.value.code == "legal_hold"
    assert refused.value.detail == (
        f"this memory is under legal hold {hold_id} (investigation); a compliance officer "
        f"must lift the hold (DELETE /v1/legal-holds/{hold_id}) first")
    assert "u-held" not in refused.value.detail
    with world.runtime.sessions() as session, pytest.raises(LegalHoldActive):
        entries.delete_entry(session, world.runtime.plane, world.actor, entry.id)  # type: ignore[union-attr]
    with world.runtime.sessions() as session, pytest.raises(LegalHoldActive):
        memories.clear_scope(session, world.runtime.plane, world.actor,
                             MemoryAddress.parse(Scope.user, "u-held"))
    assert pointer.storage_path in objects(world, "memories")
    failed = [r for r in _rows(world, "delete") if not r.success]
    assert len(failed) == 2
    assert all(hold_id in r.detail and "u-held" not in r.detail for r in failed)

    lift(world, hold_id)
    with world.runtime.sessions() as session:
        memories.delete_value(session, world.runtime.plane, world.actor,
                              MemoryAddress.parse(Scope.user, "u-held", "k"))
    assert [r.pointer_id for r in deletes(world)] == [pointer.id]


def test_a_tenant_hold_keeps_everything(world: ServiceWorld) -> None:
    clock = ManualWallClock()
    policy(world, scope="agent", retention_days=1, auto_delete=True)
    put(world, "agent", "bot", "k")
    put(world, "user", "u1", "ttl", ttl_days=1)
    hold(world, tenant=True, reason="regulatory")
    clock.advance(2 * 86400)
    result = run(world, clock())
    assert (result["deleted"], result["held"]) == (0, 2)
    assert result["ttl"] == {"due": 0, "deleted": 0, "held": 1}
    assert set(pointers(world)) == {"k", "ttl"}


def test_an_erasure_of_a_held_subject_is_refused_until_the_hold_is_lifted(
        world: ServiceWorld) -> None:
    put(world, "user", "u-held", "k")
    hold_id = hold(world, user_id="u-held", reason="litigation")

    with world.runtime.sessions() as session, pytest.raises(LegalHoldActive) as refused:
        compliance.start_erasure(session, world.actor, "u-held", dry_run=False)
    assert refused.value.detail.startswith(
        f"this data subject is under legal hold {hold_id} (litigation)")
    # a dry run deletes nothing and stays allowed
    with world.runtime.sessions() as session:
        assert compliance.start_erasure(session, world.actor, "u-held", dry_run=True).kind \
            == "erase"
    erase_rows = [r for r in _rows(world, "erase") if not r.success]
    assert len(erase_rows) == 1 and hold_id in erase_rows[0].detail

    lift(world, hold_id)
    with world.runtime.sessions() as session:
        job = compliance.start_erasure(session, world.actor, "u-held", dry_run=False)
    assert (job.kind, job.state) == ("erase", "queued")


def test_a_hold_placed_after_the_request_stops_the_erasure_job_before_it_deletes(
        lone_world: ServiceWorld) -> None:
    world = lone_world
    from control_plane.job_handlers import JobWorker

    put(world, "user", "u-late", "k")
    with world.runtime.sessions() as session:
        compliance.start_erasure(session, world.actor, "u-late", dry_run=False)
    hold_id = hold(world, user_id="u-late", reason="litigation")
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                       owner="test-worker")
    while worker.run_once() is not None:
        pass
    with world.runtime.sessions() as session:
        job = session.scalars(select(Job).where(Job.tenant_id == world.tenant_id,
                                                Job.kind == "erase")).one()
    assert job.state == "failed"
    assert job.error is not None and job.error.startswith(
        f"legal_hold: this data subject is under legal hold {hold_id} (litigation)")
    assert set(pointers(world)) == {"k"}


def test_a_hold_on_a_subject_being_erased_is_refused(world: ServiceWorld) -> None:
    from control_plane.db.base import new_id
    from control_plane.db.models import SubjectErasure

    job_id = new_id()
    with world.runtime.sessions() as session:
        session.add(SubjectErasure(tenant_id=world.tenant_id, user_id="u-going",
                                   job_id=job_id))
        session.commit()
    with pytest.raises(Conflict) as refused:
        hold(world, user_id="u-going", reason="litigation")
    assert refused.value.extra == {"job_id": str(job_id)}


def test_placing_and_lifting_are_audited_and_lifting_keeps_only_a_hash(
        world: ServiceWorld) -> None:
    subject_hold = hold(world, user_id="u-secret", reason="audit")
    scope_hold = hold(world, scope="entity", scope_ref="ent_acme", reason="other")
    placed = _rows(world, "legal_hold")
    assert [r.detail for r in placed] == [
        f"hold {subject_hold} placed on a data subject (audit)",
        f"hold {scope_hold} placed on scope entity (other)"]
    assert _hold_row(world, subject_hold).user_id == "u-secret"

    lift(world, subject_hold)
    lift(world, subject_hold)  # lifting again changes nothing and audits nothing new
    lifted = _hold_row(world, subject_hold)
    assert (lifted.user_id, lifted.scope_ref, lifted.lifted_by) == (None, None, "test")
    assert lifted.lifted_at is not None
    assert lifted.subject_hash == pseudonym(world.runtime.plane.credentials, world.tenant_id,
                                            "u-secret")
    rows = _rows(world, "legal_hold_lift")
    assert [r.detail for r in rows] == [f"hold {subject_hold} (audit) lifted by test"]
    assert _hold_row(world, scope_hold).scope_ref == "ent_acme"  # not a person: kept
    assert all("u-secret" not in r.detail for r in _rows(world, "legal_hold"))
