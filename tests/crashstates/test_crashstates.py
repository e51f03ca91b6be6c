"""Crash states, explored (tests/crashstates/model.py): every state POSIX allows after a
crash at any point of each workload's recorded file-system operations is replayed and
reconciled, and the invariants hold in each, with the control plane on SQLite and on
PostgreSQL (the durable server: the model takes a commit as durable once answered). Then one
test per finding the exploration made, each on the crash state that showed it."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text

from control_plane.audit import checkpoints
from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.db.models import AuditHead, GcCandidate
from control_plane.integrity import reconcile
from storage_adapters.local import LocalAdapter
from tests.integrity.helpers import checkpoint_left_unrecorded
from tests.support.postgres import ExternalPostgres, PostgresCluster
from tests.support.service import ServiceWorld, SimulatedCrash

from . import pgsnap
from .model import crash_states
from .recorder import Recorder, SqliteCommits
from .runner import WORKLOADS, explore


@pytest.fixture(scope="module")
def pg_template(durable_postgres: PostgresCluster | ExternalPostgres) -> str:
    """A migrated database on the durable server, cloned for each workload."""
    url = durable_postgres.create_database()
    engine = make_engine(url)
    try:
        upgrade(engine)
        with engine.connect() as connection:
            shown = {name: connection.execute(text(f"SHOW {name}")).scalar()
                     for name in ("fsync", "synchronous_commit")}
    finally:
        engine.dispose()
    assert shown == {"fsync": "on", "synchronous_commit": "on"}  # the model's premise
    return url


@pytest.fixture
def control_plane(request: pytest.FixtureRequest) -> Iterator[str]:
    """"sqlite", or a fresh PostgreSQL database of the workload's own (dropped after)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    url = pgsnap.clone(request.getfixturevalue("pg_template"))
    try:
        yield url
    finally:
        pgsnap.drop(url)


@pytest.mark.slow
@pytest.mark.parametrize("control_plane", ["sqlite", pytest.param(
    "postgres", marks=pytest.mark.postgres)], indirect=True)
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_crash_state_of_the_workload_reconciles_to_the_invariants(
        name: str, control_plane: str, tmp_path: Path) -> None:
    outcome = explore(name, WORKLOADS[name], tmp_path, control_plane)
    assert outcome.operations >= 5  # the recording saw the workload's bucket operations
    assert outcome.commits >= 2  # and the database's commits between them
    assert outcome.states >= 10
    assert outcome.findings == {}


def _recorded(tmp_path: Path) -> tuple[LocalAdapter, Recorder]:
    database = tmp_path / "empty.sqlite"
    sqlite3.connect(database).close()
    adapter = LocalAdapter(tmp_path / "bucket")
    recorder = Recorder(tmp_path / "bucket", SqliteCommits(database, tmp_path / "snaps"))
    recorder.install()
    return adapter, recorder


def _after_ack(recorder: Recorder) -> list[dict[str, bytes]]:
    """The bucket's files in every crash state after the last acknowledgement."""
    ack = max(i for i, op in enumerate(recorder.log.ops) if op.kind == "ack")
    return [dict(s.files) for s in crash_states(recorder.log) if s.point > ack]


def test_a_put_into_new_directories_survives_every_crash_after_it_returns(
        tmp_path: Path) -> None:
    # Found: the put fsynced the object's directory but not that directory's own entry in
    # its parent, so a crash could drop the new directories and the object with them.
    adapter, recorder = _recorded(tmp_path)
    try:
        adapter.put("tenants/t/memories/agent/x/k/v1.json", b"value")
        recorder.mark("ack", "k", "value")
    finally:
        recorder.uninstall()
    target = f"{recorder.root}/tenants/t/memories/agent/x/k/v1.json"
    states = _after_ack(recorder)
    assert states and all(files.get(target) == b"value" for files in states)


def test_a_delete_stays_deleted_in_every_crash_after_it_returns(tmp_path: Path) -> None:
    # Found: delete_many unlinked without fsyncing the directory, so a crash could bring an
    # object back after its pointer (or GC's tombstone) was gone.
    adapter = LocalAdapter(tmp_path / "bucket")
    adapter.put("memories/a/k/v1.json", b"one")
    adapter.put("memories/a/j/v1.json", b"two")
    adapter, recorder = _recorded(tmp_path)
    try:
        assert adapter.delete_many(["memories/a/k/v1.json"]) == 1
        recorder.mark("ack", "k", None)
    finally:
        recorder.uninstall()
    states = _after_ack(recorder)
    assert states
    assert all(f"{recorder.root}/memories/a/k/v1.json" not in files for files in states)
    assert all(files.get(f"{recorder.root}/memories/a/j/v1.json") == b"two" for files in states)


def test_an_orphan_whose_sweep_crashed_before_its_delete_goes_at_the_next_reconcile(
        world: ServiceWorld) -> None:
    # Found: the crash state "tombstone committed, object still in the bucket" kept the
    # orphan until the tombstone expired (7 days): mark skipped it as known, sweep as swept.
    plane = world.runtime.plane
    path = f"tenants/{world.tenant_id}/memories/agent/lost/{uuid.uuid4().hex}.json"
    with world.runtime.sessions() as session:
        plane.active(session, world.tenant_id).adapter.put(path, b"left by a crash")
    world.crash_at = "gc:after_claim"
    with world.runtime.sessions() as session, pytest.raises(SimulatedCrash):
        reconcile.collect_orphans(session, plane, grace_seconds=0, tenant_id=world.tenant_id)
    with world.runtime.sessions() as session:
        swept = session.scalar(select(GcCandidate.swept_at).where(GcCandidate.path == path))
        assert swept is not None  # the crash state: a tombstone, and the object still there
        report = reconcile.collect_orphans(session, plane, grace_seconds=0,
                                           tenant_id=world.tenant_id)
        assert report.orphans_deleted == 1
        listed = [i.path for i in plane.active(session, world.tenant_id).adapter.list(
            f"tenants/{world.tenant_id}/memories/")]
    assert listed == []


def test_a_checkpoint_written_but_not_recorded_is_settled_by_reconcile(
        world: ServiceWorld) -> None:
    # Found: a crash between the checkpoint's put and the database's record of it left the
    # bucket a checkpoint ahead, which verification reported as a record set back.
    runtime = world.runtime
    seq = checkpoint_left_unrecorded(world)
    with runtime.sessions() as session:
        report = reconcile.reconcile(session, runtime.plane, grace_seconds=0,
                                     tenant_id=world.tenant_id, settings=runtime.settings)
        assert report.checkpoints_recorded == 1 and report.errors == []
        assert session.get(AuditHead, world.tenant_id).anchored_seq == seq  # type: ignore[union-attr]
        assert checkpoints.check(session, runtime.plane, runtime.settings,
                                 world.tenant_id).problem is None
