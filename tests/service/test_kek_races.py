"""KEK rotation and retirement racing the readers and writers of subject keys.

Each race runs the rotation and the retirement (another replica, in effect: fresh sessions,
and no subject key left in this process's cache) at a named step of the code under test
(``keys.subject_keys.checkpoint``): a read, an export job and a new subject key's write that
hold a key row read before the rotation, after which the retirement destroys the old KEK.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import service as compliance
from control_plane.db.models import ErasureReceipt, KekVersion, MemoryPointer, SubjectKey
from control_plane.job_handlers import JobWorker
from control_plane.keys.rotation import RetireReport, RotationReport, retire_keks, rotate_kek
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.plane.keyring import Keyring
from tests.compliance.conftest import service_runtime  # noqa: F401  (a database of its own:
from tests.compliance.helpers import (  # no server's worker takes our jobs)
    bucket_paths,
    job,
    write_subject,
)
from tests.support.service import ServiceWorld


def _ring(world: ServiceWorld) -> Keyring:
    ring = world.runtime.plane.keys
    assert ring is not None
    return ring


def _forget_all(world: ServiceWorld) -> None:
    with world.runtime.sessions() as session:
        ids = list(session.scalars(select(SubjectKey.id)
                                   .where(SubjectKey.tenant_id == world.tenant_id)))
    _ring(world).cache.forget(ids)


def _rotate_and_retire(world: ServiceWorld) -> tuple[RotationReport, RetireReport]:
    with world.runtime.sessions() as session:
        rotated = rotate_kek(session, _ring(world), world.actor)
    with world.runtime.sessions() as session:
        retired = retire_keks(session, _ring(world), world.actor)
    _forget_all(world)  # as on another replica: nothing of the old keys in memory
    return rotated, retired



def _versions(world: ServiceWorld) -> list[tuple[int, bool]]:
    with world.runtime.sessions() as session:
        return [(k.version, k.retired_at is not None) for k in session.scalars(
            select(KekVersion).where(KekVersion.tenant_id == world.tenant_id)
            .order_by(KekVersion.version))]


def test_a_read_holding_a_key_row_from_before_a_rotation_and_retirement_is_answered(
        world: ServiceWorld, at_step: dict[str, Callable[[], None]]) -> None:
    address = MemoryAddress.parse(Scope.user, "u1", "note")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, address, "kept",
                           MemoryMeta())
    _forget_all(world)
    reports = []
    at_step["unwrap"] = lambda: reports.append(_rotate_and_retire(world))
    with world.runtime.sessions() as session:
        value = memories.get_value(session, world.runtime.plane, world.actor, address).value
    assert value == "kept"
    [(rotated, retired)] = reports
    assert (rotated.from_versions, rotated.to_version, rotated.rewrapped) == ([1], 2, 1)
    assert (retired.retired, retired.in_use, retired.current) == ([1], {}, 2)
    assert _versions(world) == [(1, True), (2, False)]


def test_an_export_running_across_a_rotation_and_retirement_exports_everything(
        world: ServiceWorld, at_step: dict[str, Callable[[], None]]) -> None:
    written = write_subject(world, "alice", 9)
    _forget_all(world)
    with world.runtime.sessions() as session:
        queued = compliance.start_export(session, world.actor, "alice", "json")
    reports = []
    at_step["unwrap"] = lambda: reports.append(_rotate_and_retire(world))
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings)
    assert worker.run_once() == queued.id
    assert len(reports) == 1  # the rotation and retirement ran inside the export
    done = job(world, queued.id)
    assert (done.state, done.attempts, done.error) == ("completed", 1, None)
    assert done.result is not None
    counts = done.result["counts"]
    assert (counts["pointers"], counts["exported"], counts["missing"], counts["corrupt"]) == (
        len(written), len(written), 0, 0)
    assert _versions(world) == [(1, True), (2, False)]


def test_a_new_subject_key_wrapped_under_a_kek_retired_meanwhile_is_wrapped_again(
        world: ServiceWorld, at_step: dict[str, Callable[[], None]]) -> None:
    first = MemoryAddress.parse(Scope.user, "u1", "note")
    with world.runtime.sessions() as session:  # the tenant's KEK v1 exists
        memories.set_value(session, world.runtime.plane, world.actor, first, "one",
                           MemoryMeta())
    # u2's key is wrapped under v1; before its row is written, v2 becomes current, u1's key
    # moves to it, and v1 (no key left on it) is retired and destroyed.
    reports = []
    at_step["key-wrapped"] = lambda: reports.append(_rotate_and_retire(world))
    second = MemoryAddress.parse(Scope.user, "u2", "note")
    with world.runtime.sessions() as session:
        memories.set_value(session, world.runtime.plane, world.actor, second, "two",
                           MemoryMeta())
    [(_, retired)] = reports
    assert retired.retired == [1]
    _forget_all(world)  # a restart, or another replica: the key must unwrap from the row
    with world.runtime.sessions() as session:
        assert memories.get_value(session, world.runtime.plane, world.actor,
                                  second).value == "two"
        versions = {k.scope_ref: k.kek_version_id for k in session.scalars(
            select(SubjectKey).where(SubjectKey.tenant_id == world.tenant_id))}
        current = session.scalar(select(KekVersion.id).where(
            KekVersion.tenant_id == world.tenant_id, KekVersion.version == 2))
    assert versions == {"u1": current, "u2": current}


def _erase(world: ServiceWorld, user_id: str) -> dict[str, object]:
    with world.runtime.sessions() as session:
        queued = compliance.start_erasure(session, world.actor, user_id, dry_run=False)
    worker = JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings)
    assert worker.run_once() == queued.id
    done = job(world, queued.id)
    assert (done.state, done.error) == ("completed", None)
    assert done.result is not None
    with world.runtime.sessions() as session:
        receipt = session.get(ErasureReceipt, uuid.UUID(done.result["receipt_id"]))
        assert receipt is not None
        return dict(receipt.body)


def _subject_keys(world: ServiceWorld) -> dict[str, bool]:
    """scope_ref -> whether its key is still wrapped (alive); an erased subject's ref is
    kept only as a keyed hash, shown here as "erased"."""
    with world.runtime.sessions() as session:
        return {"erased" if k.scope_ref.startswith("hmac:") else k.scope_ref:
                k.wrapped_key is not None for k in session.scalars(
                    select(SubjectKey).where(SubjectKey.tenant_id == world.tenant_id))}


def _readable(world: ServiceWorld, written: dict[str, object]) -> None:
    """Every object of ``written`` opens (via the service), so the key is alive."""
    _forget_all(world)
    with world.runtime.sessions() as session:
        pointers = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id,
            MemoryPointer.storage_path.in_(list(written)))))
        assert len(pointers) == len(written)
        for pointer in pointers:
            value = memories.read_pointer(session, world.runtime.plane, world.actor, pointer)
            assert value.value == written[pointer.storage_path]


@pytest.mark.slow
def test_an_erasure_running_inside_a_rotation_is_not_undone_by_its_rewrap(
        world: ServiceWorld, at_step: dict[str, Callable[[], None]]) -> None:
    """The rotation has read every key to re-wrap (alice's among them) when the erasure
    shreds alice's key: its re-wrap must not write alice's key back. (On SQLite the
    rotation's open read snapshot made the erasure's log scrub wait 30 s per attempt, 50
    attempts: each now waits 100 ms, and the scrub gives up after about 5 s as intended.)"""
    alice = write_subject(world, "alice", 6)
    bob = write_subject(world, "bob", 3)
    _forget_all(world)
    receipts = []
    at_step["unwrap"] = lambda: receipts.append(_erase(world, "alice"))
    with world.runtime.sessions() as session:
        rotated = rotate_kek(session, _ring(world), world.actor)
    [receipt] = receipts
    assert receipt["counts"]["objects"] == len(alice)  # type: ignore[index]
    assert rotated.rewrapped == 1  # bob's key only
    with world.runtime.sessions() as session:
        retired = retire_keks(session, _ring(world), world.actor)
    assert (retired.retired, retired.in_use) == ([1], {})
    assert _subject_keys(world) == {"erased": False, "bob": True}
    assert not set(alice) & bucket_paths(world)
    _readable(world, bob)


def test_a_rotation_and_retirement_inside_a_running_erasure(
        world: ServiceWorld, at_step: dict[str, Callable[[], None]]) -> None:
    """The erasure has blocked the subject and is sweeping when another replica rotates and
    retires: the erasure finishes with a full receipt, the bystander's memories open under
    the new KEK, the subject's key stays destroyed."""
    alice = write_subject(world, "alice", 6)
    bob = write_subject(world, "bob", 3)
    ran: list[object] = []

    def checkpoint(step: str) -> None:
        if step == "erase:after_block" and not ran:
            ran.append(_rotate_and_retire(world))

    world.runtime.plane.checkpoint = checkpoint
    receipt = _erase(world, "alice")
    assert len(ran) == 1
    assert receipt["counts"]["objects"] == len(alice)  # type: ignore[index]
    assert receipt["counts"]["pointers"] == len(alice)  # type: ignore[index]
    assert _versions(world) == [(1, True), (2, False)]
    assert _subject_keys(world) == {"erased": False, "bob": True}
    assert not set(alice) & bucket_paths(world)
    _readable(world, bob)
