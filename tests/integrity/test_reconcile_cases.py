"""The reconciler, case by case, on the real local bucket and database (SQLite and PostgreSQL):
which pending rows it settles and how, what it deletes and keeps, what it reports and audits."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import insert, select, update

from control_plane.addresses import MemoryAddress, Scope
from control_plane.db.base import new_id, utcnow
from control_plane.db.models import AuditHead, MemoryPointer, SubjectKey
from control_plane.integrity.reconcile import ReconcileReport, reconcile
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.observability.metrics import Metrics
from control_plane.plane.kek_providers import KeyUnavailable
from tests.support.crypto import keyring, tampered
from tests.support.service import ServiceWorld

from .helpers import (
    HOUR,
    audit_rows,
    checkpoint_left_unrecorded,
    file_of,
    listed,
    local_config,
    other_world,
    pointer,
    sealed,
    statuses,
    target,
)

COMPLETED, ROLLED_BACK = "pending write completed", \
    "pending write rolled back: object absent or different"


def run(world: ServiceWorld, grace: float = 0, **kwargs: Any) -> ReconcileReport:
    with world.runtime.sessions() as session:
        return reconcile(session, world.runtime.plane, grace_seconds=grace,
                         tenant_id=world.tenant_id, **kwargs)


def counts(report: ReconcileReport) -> tuple[int, int, int, int, int, list[str]]:
    return (report.writes_completed, report.writes_rolled_back, report.deletes_completed,
            report.corrupt, report.checkpoints_recorded, report.errors)


def test_nothing_pending_reports_nothing(world: ServiceWorld) -> None:
    assert counts(run(world)) == (0, 0, 0, 0, 0, [])


def test_pending_writes_are_completed_or_rolled_back_by_what_the_bucket_holds(
        world: ServiceWorld) -> None:
    where = target(world)
    arrived = pointer(world, where, "arrived", "pending_write")
    lost = pointer(world, where, "lost", "pending_write", stored=None)
    other = pointer(world, where, "other", "pending_write", stored=None)
    # A valid object under the same key, path and pointer, of other content.
    where.adapter.put(other.storage_path,
                      sealed(world, where, other.storage_path, other.id, b'"else"'))
    broken = pointer(world, where, "broken", "pending_write", stored=None)
    where.adapter.put(broken.storage_path, tampered(
        sealed(world, where, broken.storage_path, broken.id, b'"broken"')))

    assert counts(run(world)) == (1, 3, 0, 0, 0, [])
    assert statuses(world) == {"arrived": "synced"}
    assert world.read(MemoryAddress.parse(Scope.user, "u1", "arrived")) == "arrived"
    # The rolled back writes' objects are deleted at once, the completed one's kept.
    assert listed(where) == {arrived.storage_path}
    assert sorted(audit_rows(world, "reconcile"), key=str) == sorted([
        ("reconcile", "system", "reconciler", arrived.id, COMPLETED),
        ("reconcile", "system", "reconciler", lost.id, ROLLED_BACK),
        ("reconcile", "system", "reconciler", other.id, ROLLED_BACK),
        ("reconcile", "system", "reconciler", broken.id, ROLLED_BACK),
    ], key=str)
    assert counts(run(world)) == (0, 0, 0, 0, 0, [])


def test_a_pending_row_younger_than_the_grace_period_is_left_alone(world: ServiceWorld) -> None:
    where = target(world)
    write = pointer(world, where, "w", "pending_write")
    doomed = pointer(world, where, "d", "pending_delete")
    assert counts(run(world, grace=3600)) == (0, 0, 0, 0, 0, [])
    assert statuses(world) == {"w": "pending_write", "d": "pending_delete"}
    with world.runtime.sessions() as session:
        session.execute(update(MemoryPointer).where(MemoryPointer.id.in_([write.id, doomed.id]))
                        .values(updated_at=utcnow() - 2 * HOUR))
        session.commit()
    assert counts(run(world, grace=3600)) == (1, 0, 1, 0, 0, [])
    assert statuses(world) == {"w": "synced"}
    assert listed(where) == {write.storage_path}


def test_a_pending_write_the_bucket_cannot_answer_for_stays_pending(world: ServiceWorld) -> None:
    where = target(world)
    stuck = pointer(world, where, "stuck", "pending_write", stored=None,
                    updated=utcnow() - HOUR)
    loop = file_of(where, stuck.storage_path)
    loop.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(loop, loop)  # a read of it fails with ELOOP: the bucket is unavailable
    try:
        fine = pointer(world, where, "fine", "pending_write")
        report = run(world)
        assert counts(report) == (1, 0, 0, 0, 0, [f"{stuck.id}: StorageUnavailable"])
        assert statuses(world) == {"stuck": "pending_write", "fine": "synced"}
        assert [r[3] for r in audit_rows(world, "reconcile")] == [fine.id]
    finally:
        loop.unlink()


def test_a_pending_write_whose_key_service_is_down_stays_pending(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    where = target(world)
    waiting = pointer(world, where, "waiting", "pending_write")
    ring = keyring(world.runtime)

    def down(*args: object) -> bytes:
        raise KeyUnavailable("KMS unreachable")

    monkeypatch.setattr(ring.provider("local"), "unwrap", down)
    with world.runtime.sessions() as session:
        ring.cache.forget(list(session.scalars(select(SubjectKey.id).where(
            SubjectKey.tenant_id == world.tenant_id))))
    assert counts(run(world)) == (0, 0, 0, 0, 0, [f"{waiting.id}: KeyServiceUnavailable"])
    assert statuses(world) == {"waiting": "pending_write"}
    assert listed(where) == {waiting.storage_path}
    monkeypatch.undo()
    assert counts(run(world)) == (1, 0, 0, 0, 0, [])


def test_a_pending_write_overwritten_or_removed_meanwhile_is_left_as_its_writer_left_it(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by this test: the row was locked without being read again, and the session
    keeps objects across commits, so the reconciler judged the row by the status it had
    when listed. An overwrite acknowledged while the reconciler read the old object had its
    row deleted (and its object then collected as an orphan)."""
    where = target(world)
    late = pointer(world, where, "late", "pending_write", stored=None, updated=utcnow() - HOUR)
    gone = pointer(world, where, "gone", "pending_write", stored=None)
    real_get = where.adapter.get

    def get_while_a_writer_acts(path: str, *args: Any, **kwargs: Any) -> bytes:
        try:
            return real_get(path, *args, **kwargs)  # absent: the write is to be rolled back
        finally:
            with world.runtime.sessions() as other:
                if path == late.storage_path:  # the key is overwritten, and acknowledged
                    memories.set_value(other, world.runtime.plane, world.actor,
                                       MemoryAddress.parse(Scope.user, "u1", "late"),
                                       "overwritten", MemoryMeta())
                else:  # the row is removed
                    other.delete(other.get(MemoryPointer, gone.id))
                    other.commit()

    monkeypatch.setattr(where.adapter, "get", get_while_a_writer_acts)
    assert counts(run(world)) == (0, 0, 0, 0, 0, [])
    monkeypatch.undo()
    assert statuses(world) == {"late": "synced"}
    assert world.read(MemoryAddress.parse(Scope.user, "u1", "late")) == "overwritten"
    assert len(listed(where)) == 1
    assert audit_rows(world, "reconcile") == []


def test_a_rolled_back_write_whose_object_cannot_be_deleted_leaves_it_to_gc(
        world: ServiceWorld) -> None:
    where = target(world)
    odd = pointer(world, where, "odd", "pending_write", stored=None)
    # A directory where the object should be: not an object (absent), and not deletable.
    blocker = file_of(where, odd.storage_path)
    (blocker / "inside").mkdir(parents=True)
    try:
        assert counts(run(world)) == (0, 1, 0, 0, 0, [])
        assert statuses(world) == {}
        assert blocker.is_dir()
    finally:
        shutil.rmtree(blocker)


def test_pending_deletes_are_finished_bucket_by_bucket(world: ServiceWorld,
                                                       tmp_path: Path) -> None:
    broken_id = local_config(world, tmp_path / "broken")
    other_id = local_config(world, tmp_path / "other")
    broken, here, other = target(world, broken_id), target(world), target(world, other_id)
    # The oldest row is in a bucket whose delete fails: the others are still finished.
    stuck = pointer(world, broken, "stuck", "pending_delete", stored=None,
                    updated=utcnow() - 2 * HOUR)
    (file_of(broken, stuck.storage_path) / "inside").mkdir(parents=True)
    first = pointer(world, here, "first", "pending_delete", updated=utcnow() - HOUR)
    second = pointer(world, other, "second", "pending_delete")
    kept = pointer(world, here, "kept", "synced")

    report = run(world)
    assert counts(report) == (0, 0, 2, 0, 0, [f"storage {broken_id}: StorageUnavailable"])
    assert statuses(world) == {"stuck": "pending_delete", "kept": "synced"}
    assert listed(here) == {kept.storage_path}
    assert listed(other) == set()
    assert sorted(audit_rows(world, "reconcile"), key=str) == sorted([
        ("reconcile", "system", "reconciler", first.id, "pending delete completed"),
        ("reconcile", "system", "reconciler", second.id, "pending delete completed"),
    ], key=str)


def test_more_pending_deletes_than_one_batch_are_all_finished(world: ServiceWorld) -> None:
    first = pointer(world, target(world), "k0", "pending_delete", stored=None)
    with world.runtime.sessions() as session:  # 500 more like it, in one statement
        columns = {c.key: getattr(first, c.key) for c in MemoryPointer.__table__.c}
        rows = [{**columns, "id": new_id(), "key": f"k{n}",
                 "storage_path": first.storage_path.replace("/k0/", f"/k{n}/")}
                for n in range(1, 501)]
        session.execute(insert(MemoryPointer), rows)
        session.commit()
    assert counts(run(world)) == (0, 0, 501, 0, 0, [])
    assert statuses(world) == {}
    assert {r[3] for r in audit_rows(world, "reconcile")} == {first.id} | {r["id"] for r in rows}


def test_corrupt_pointers_are_counted_for_the_tenant_asked_about(world: ServiceWorld) -> None:
    stranger = other_world(world)
    for w, keys in ((world, ("a", "b")), (stranger, ("c",))):
        for key in keys:
            pointer(w, target(w), key, "corrupt")
    pointer(world, target(world), "fine", "synced")
    assert counts(run(world)) == (0, 0, 0, 2, 0, [])
    assert counts(run(stranger)) == (0, 0, 0, 1, 0, [])
    assert statuses(world) == {"a": "corrupt", "b": "corrupt", "fine": "synced"}


def test_what_the_reconciler_settles_is_counted_in_the_metrics(
        world: ServiceWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = Metrics()
    monkeypatch.setattr(world.runtime.plane, "metrics", metrics)
    where = target(world)
    pointer(world, where, "done", "pending_write")
    for key in ("lost1", "lost2"):
        pointer(world, where, key, "pending_write", stored=None)
    for key in ("d1", "d2", "d3"):
        pointer(world, where, key, "pending_delete")
    assert counts(run(world)) == (1, 2, 3, 0, 0, [])

    def sample(action: str) -> float | None:
        return metrics.registry.get_sample_value("memplane_reconcile_actions_total",
                                                 {"action": action})

    assert (sample("write_completed"), sample("write_rolled_back"),
            sample("delete_completed")) == (1.0, 2.0, 3.0)



def _anchored(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        return int(session.get(AuditHead, world.tenant_id).anchored_seq)  # type: ignore[union-attr]


def test_checkpoints_left_unrecorded_are_settled_only_with_the_signing_settings_and_per_tenant(
        world: ServiceWorld) -> None:
    stranger = other_world(world)
    mine, theirs = checkpoint_left_unrecorded(world), checkpoint_left_unrecorded(stranger)
    settings = world.runtime.settings
    assert counts(run(world)) == (0, 0, 0, 0, 0, [])  # without the settings: not looked at
    assert _anchored(world) == 0
    assert counts(run(world, settings=settings)) == (0, 0, 0, 0, 1, [])
    assert (_anchored(world), _anchored(stranger)) == (mine, 0)
    assert counts(run(world, settings=settings)) == (0, 0, 0, 0, 0, [])
    assert counts(run(stranger, settings=settings)) == (0, 0, 0, 0, 1, [])
    assert _anchored(stranger) == theirs


def test_a_checkpoint_that_cannot_be_checked_is_an_error_of_the_report(
        world: ServiceWorld) -> None:
    checkpoint_left_unrecorded(world)
    wrong = world.runtime.settings.model_copy(
        update={"receipt_signing_key": SecretStr("not a key")})
    report = run(world, settings=wrong)
    assert counts(report)[:5] == (0, 0, 0, 0, 0)
    assert report.errors == [
        f"audit checkpoint of tenant {world.tenant_id}: MEMPLANE_RECEIPT_SIGNING_KEY must be "
        "base64 of 32 raw bytes or an Ed25519 PEM private key"]
    assert _anchored(world) == 0

