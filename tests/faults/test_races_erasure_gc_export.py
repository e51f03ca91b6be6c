"""Races that could break a promise, each made deterministic by pausing the code under test
at its own checkpoints (``plane.checkpoint``) instead of sleeping:

- an erasure against a write that looked the subject up before the erasure's block and
  puts its object later (I4: nothing of the subject behind a ``completed`` receipt; I1);
- orphan GC (mark, then sweep) against a write whose object is in the bucket but whose
  pointer is not committed yet (I1: never a synced pointer without its object);
- an export against overwrites and deletes of the subject's memories (the archive's files
  and the manifest's hashes agree, checked by the test itself).

Each test runs on SQLite and PostgreSQL, on a database of its own (no server's worker may
take its jobs).
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import uuid
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select

from control_plane.addresses import MemoryAddress, Scope
from control_plane.compliance import export_download, export_items
from control_plane.compliance import service as compliance
from control_plane.db.engine import make_engine
from control_plane.db.migrate import upgrade
from control_plane.db.models import GcCandidate, MemoryPointer
from control_plane.integrity import reconcile
from control_plane.job_handlers import JobWorker
from control_plane.memories import guesses
from control_plane.memories import service as memories
from control_plane.memories.schemas import MemoryMeta
from control_plane.plane.data_plane import no_faults
from control_plane.runtime import Runtime
from tests.compliance.helpers import job, write_subject
from tests.support.service import ServiceWorld, make_settings

SUBJECT, BYSTANDER = "alice", "bob"
WAIT = 60  # seconds a paused thread waits for its go-ahead; reached only when a test is broken


@pytest.fixture(scope="session")
def service_runtime(database: str, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """A database of its own: a server's in-process worker must not take these jobs."""
    url = database
    if database != "sqlite":
        url = request.getfixturevalue("postgres").create_database()
        engine = make_engine(url)
        upgrade(engine)
        engine.dispose()
    runtime = Runtime(make_settings(url, tmp_path_factory.mktemp("race-services")))
    if url == "sqlite":
        runtime.migrate()
    try:
        yield runtime
    finally:
        runtime.close()


class Pauses:
    """Checkpoints that stop a thread until the test lets it go on.

    ``pause(step, occurrence)`` arms a stop at the ``occurrence``-th time the step is
    reached from now on (counted over all threads); the thread then waits in ``checkpoint`` until
    ``release(step)``. ``reached(step)`` blocks the test until a thread is stopped there.
    A stop that is never reached or never released fails the test after ``WAIT`` seconds
    rather than hang it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._reached: dict[str, threading.Event] = {}
        self._go: dict[str, threading.Event] = {}
        self.errors: list[str] = []

    def pause(self, step: str, occurrence: int = 1) -> None:
        with self._lock:
            self._armed[step] = self._seen.get(step, 0) + occurrence
        self._reached[step] = threading.Event()
        self._go[step] = threading.Event()

    def checkpoint(self, step: str) -> None:
        with self._lock:
            self._seen[step] = self._seen.get(step, 0) + 1
            stop = self._armed.get(step) == self._seen[step]
        if stop:
            self._reached[step].set()
            if not self._go[step].wait(WAIT):
                self.errors.append(f"{step} was never released")

    def reached(self, step: str, *threads: Outcome) -> None:
        """Wait until a thread stops at ``step``; fail at once if one of ``threads`` ended
        (with its error) instead."""
        for _ in range(WAIT * 20):
            if self._reached[step].wait(0.05):
                return
            for thread in threads:
                if thread.done:
                    raise AssertionError(f"{step} not reached: {thread.error!r}")
        raise AssertionError(f"no thread reached {step}")

    def release(self, step: str) -> None:
        self._go[step].set()

    def seen(self, step: str) -> int:
        return self._seen.get(step, 0)


class Outcome:
    """A call run in a thread: its result or the exception it raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.result = call()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            self.error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> Outcome:
        self._thread.join(WAIT)
        assert not self._thread.is_alive(), "the thread did not finish"
        return self


@pytest.fixture
def pauses(world: ServiceWorld) -> Iterator[Pauses]:
    p = Pauses()
    world.runtime.plane.checkpoint = p.checkpoint
    try:
        yield p
    finally:
        world.runtime.plane.checkpoint = no_faults
        assert p.errors == []


def _set(world: ServiceWorld, address: MemoryAddress, value: Any,
         meta: MemoryMeta | None = None) -> Any:
    with world.runtime.sessions() as session:
        return memories.set_value(session, world.runtime.plane, world.actor, address, value,
                                  meta or MemoryMeta())


def _delete(world: ServiceWorld, address: MemoryAddress) -> Any:
    with world.runtime.sessions() as session:
        return memories.delete_value(session, world.runtime.plane, world.actor, address)


def _worker(world: ServiceWorld) -> JobWorker:
    return JobWorker(world.runtime.sessions, world.runtime.plane, world.runtime.settings,
                     owner=f"race-{uuid.uuid4().hex[:6]}")


def _target(world: ServiceWorld) -> Any:
    with world.runtime.sessions() as session:
        return world.runtime.plane.active(session, world.tenant_id)


def _memory_objects(world: ServiceWorld) -> set[str]:
    """Every object version under the tenant's ``memories/`` tree, listed from the bucket."""
    target = _target(world)
    return {info.path for info in target.adapter.list_versions(target.path("memories") + "/")}


def _pointers(world: ServiceWorld) -> list[MemoryPointer]:
    with world.runtime.sessions() as session:
        rows = list(session.scalars(select(MemoryPointer).where(
            MemoryPointer.tenant_id == world.tenant_id)))
        session.expunge_all()
        return rows


# -- erasure vs an in-flight write ------------------------------------------------------------

# Where the erasure is when the writer (whose lookup came before the block) puts its object,
# and where the writer is when the erasure writes its receipt.
ERASURE_STOPS = ["erase:after_block", "erase:after_sweep", "erase:after_keys",
                 "erase:before_receipt"]


@pytest.mark.parametrize("erasure_stop", ERASURE_STOPS)
@pytest.mark.parametrize("address", ["user", "conversation"])
@pytest.mark.parametrize("commit", ["after_receipt", "before_receipt"])
def test_erasure_leaves_nothing_of_an_in_flight_write(world: ServiceWorld, pauses: Pauses,
                                                      erasure_stop: str, address: str,
                                                      commit: str) -> None:
    subject = write_subject(world, SUBJECT, 6)
    bystander = write_subject(world, BYSTANDER, 3)
    late = (MemoryAddress.parse(Scope.user, SUBJECT, "late") if address == "user"
            else MemoryAddress.parse(Scope.conversation, "c-late", "late"))
    meta = MemoryMeta() if address == "user" else MemoryMeta(user_id=SUBJECT)
    pauses.pause("write:after_lookup")
    pauses.pause("write:after_put")
    pauses.pause(erasure_stop)

    writer = Outcome(lambda: _set(world, late, {"late": True}, meta))
    pauses.reached("write:after_lookup", writer)  # looked up before the erasure's block
    with world.runtime.sessions() as session:
        queued = compliance.start_erasure(session, world.actor, SUBJECT, dry_run=False)
    eraser = Outcome(lambda: _worker(world).run_once())
    pauses.reached(erasure_stop, eraser)
    before_put = _memory_objects(world)
    pauses.release("write:after_lookup")
    pauses.reached("write:after_put", writer)  # the object is in the bucket, the pointer not
    (in_flight,) = _memory_objects(world) - before_put
    if commit == "after_receipt":
        pauses.release(erasure_stop)
        eraser.join()  # the erasure finishes while the write is still in flight
        pauses.release("write:after_put")
        writer.join()
    else:
        pauses.release("write:after_put")
        writer.join()  # the write tries to commit while the erasure is paused mid-way
        assert getattr(writer.error, "status_code", None) == 409, repr(writer.error)
        pauses.release(erasure_stop)
        eraser.join()

    assert eraser.error is None
    finished = job(world, queued.id)
    assert finished.state == "completed", finished.error
    remaining = _memory_objects(world)
    pointers = _pointers(world)
    # The object the in-flight write put during the erasure is gone, and so is everything
    # of the subject written before it.
    assert in_flight not in remaining
    assert not set(subject) & remaining
    if writer.error is not None:
        # refused: the write never happened, nothing of it remains
        assert getattr(writer.error, "status_code", None) == 409, repr(writer.error)
        assert remaining == set(bystander)
        assert {p.storage_path for p in pointers} == set(bystander)
    else:
        # or it took effect after the erasure, as a new write: a new object, sealed under
        # the subject's new key (the old one is destroyed), readable
        written = writer.result
        assert isinstance(written, MemoryPointer) and written.storage_path != in_flight
        assert remaining == set(bystander) | {written.storage_path}
        assert {p.storage_path for p in pointers} == set(bystander) | {written.storage_path}
        with world.runtime.sessions() as session:
            read = memories.get_value(session, world.runtime.plane, world.actor, late)
        assert read.value == {"late": True} and read.pointer.id == written.id
    # the subject can be written again once the erasure is over
    again = _set(world, late, {"after": True}, meta)
    assert isinstance(again, MemoryPointer)
    with world.runtime.sessions() as session:
        value = memories.get_value(session, world.runtime.plane, world.actor, late).value
    assert value == {"after": True}


# -- orphan GC vs an in-flight write ------------------------------------------------------------

@pytest.mark.parametrize("gc_stop", ["before_mark", "between_mark_and_sweep"])
@pytest.mark.parametrize("existing", [False, True])
def test_gc_never_leaves_a_synced_pointer_without_its_object(
        world: ServiceWorld, pauses: Pauses, gc_stop: str, existing: bool) -> None:
    address = MemoryAddress.parse(Scope.agent, "agent-gc", "k")
    # The scope's key exists, so the write takes the fast path, which holds no transaction
    # between its put and its commit (the general path holds the row lock there, and on
    # SQLite that lock keeps GC out until the commit).
    warm = MemoryAddress.parse(Scope.agent, "agent-gc", "warm")
    _set(world, warm, {"warm": True})
    if existing:
        _set(world, address, {"v": 0})
    before_put = _memory_objects(world)
    pauses.pause("write:after_put")
    writer = Outcome(lambda: _set(world, address, {"v": 1}))
    pauses.reached("write:after_put", writer)  # the new object is in the bucket, unnamed
    (in_flight,) = _memory_objects(world) - before_put
    with world.runtime.sessions() as session:
        if gc_stop == "before_mark":
            report = reconcile.collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                               tenant_id=world.tenant_id)
            pauses.release("write:after_put")
            writer.join()
        else:
            report = reconcile.mark_orphans(session, world.runtime.plane, grace_seconds=0,
                                            tenant_id=world.tenant_id)
            pauses.release("write:after_put")
            writer.join()
            reconcile.sweep_orphans(session, world.runtime.plane, grace_seconds=0,
                                    tenant_id=world.tenant_id, report=report)
    assert writer.error is None, repr(writer.error)
    assert report.marked == 1  # the in-flight object was seen unnamed and marked
    # I1: every synced pointer names an object that is there, with the right content
    pointers = _pointers(world)
    assert sorted((p.key, p.sync_status, p.version) for p in pointers) == [
        ("k", "synced", 2 if existing else 1), ("warm", "synced", 1)]
    objects = _memory_objects(world)
    assert {p.storage_path for p in pointers} <= objects
    with world.runtime.sessions() as session:
        assert memories.get_value(session, world.runtime.plane, world.actor,
                                  address).value == {"v": 1}
    # a candidate is never adopted: the write put a fresh object and committed that one
    written = writer.result
    assert isinstance(written, MemoryPointer) and written.storage_path != in_flight
    # a GC pass now that nothing is in flight leaves exactly the named objects; the swept
    # in-flight object is remembered as a tombstone, nothing else is left pending
    with world.runtime.sessions() as session:
        reconcile.collect_orphans(session, world.runtime.plane, grace_seconds=0,
                                  tenant_id=world.tenant_id)
        rows = session.execute(select(GcCandidate.path, GcCandidate.swept_at).where(
            GcCandidate.tenant_id == world.tenant_id)).all()
    assert _memory_objects(world) == {p.storage_path for p in pointers}
    assert in_flight not in _memory_objects(world)
    assert [(path, swept is not None) for path, swept in rows] == [(in_flight, True)]


# -- a delete vs an in-flight overwrite ----------------------------------------------------------

def test_overwrite_whose_row_is_deleted_meanwhile_is_sealed_for_the_new_row(
        world: ServiceWorld, pauses: Pauses, monkeypatch: pytest.MonkeyPatch) -> None:
    """The overwrite looked the row up and sealed its object under the row's subject's key
    (alice's); the row is deleted before the overwrite commits, so the overwrite makes a new
    row, whose subject is the scope's: it must not name an object sealed under alice's key."""
    monkeypatch.setattr(guesses, "guess", lambda *args, **kwargs: None)  # it looks up
    address = MemoryAddress.parse(Scope.agent, "agent-del", "k")
    _set(world, MemoryAddress.parse(Scope.agent, "agent-del", "warm"), {"warm": True})
    _set(world, address, {"v": 0}, MemoryMeta(user_id=SUBJECT))
    before_put = _memory_objects(world)
    pauses.pause("write:after_put")
    writer = Outcome(lambda: _set(world, address, {"v": 1}))
    pauses.reached("write:after_put", writer)
    (in_flight,) = _memory_objects(world) - before_put
    _delete(world, address)
    pauses.release("write:after_put")
    writer.join()
    assert writer.error is None, repr(writer.error)
    written = writer.result
    assert isinstance(written, MemoryPointer)
    assert (written.version, written.subject_user_id) == (1, None)
    assert written.storage_path != in_flight
    assert in_flight not in _memory_objects(world)  # the object sealed for alice is gone
    with world.runtime.sessions() as session:
        read = memories.get_value(session, world.runtime.plane, world.actor, address)
    assert read.value == {"v": 1} and read.pointer.id == written.id


# -- export vs overwrites and deletes -----------------------------------------------------------

def _download(world: ServiceWorld, job_id: uuid.UUID) -> zipfile.ZipFile:
    with world.runtime.sessions() as session:
        chunks, size = export_download.download(session, world.runtime.plane, world.actor, job_id)
        data = b"".join(chunks)
    assert len(data) == size
    return zipfile.ZipFile(io.BytesIO(data))


def test_export_archive_and_manifest_agree_under_overwrites_and_deletes(
        world: ServiceWorld, pauses: Pauses, monkeypatch: pytest.MonkeyPatch) -> None:
    # the export reads windows of two: the meddling comes after the first window was read
    # and before the second is
    monkeypatch.setattr(export_items, "WINDOW_ITEMS", 2)
    keys = [f"k{i}" for i in range(6)]
    addresses = {k: MemoryAddress.parse(Scope.user, SUBJECT, k) for k in keys}
    for k in keys:
        _set(world, addresses[k], {"k": k, "v": 0})
    ids = {p.key: p.id for p in _pointers(world)}
    order = sorted(keys, key=lambda k: ids[k])  # the export walks the pointers by id
    overwritten_ahead, deleted_ahead = order[3], order[4]
    overwritten_behind, deleted_behind = order[0], order[1]

    def meddle() -> None:
        # the export has its first page and is about to read the third item: change the
        # ones it has already read and the ones it has not read yet
        _set(world, addresses[overwritten_ahead], {"k": overwritten_ahead, "v": 1})
        _delete(world, addresses[deleted_ahead])
        _set(world, addresses[overwritten_behind], {"k": overwritten_behind, "v": 1})
        _delete(world, addresses[deleted_behind])

    seen_items: list[int] = []

    def at_item() -> None:
        seen_items.append(1)
        if len(seen_items) == 3:
            meddle()

    original = pauses.checkpoint

    def checkpoint(step: str) -> None:
        if step == "export:before_item":
            at_item()
        original(step)

    world.runtime.plane.checkpoint = checkpoint
    with world.runtime.sessions() as session:
        queued = compliance.start_export(session, world.actor, SUBJECT, "json")
    assert _worker(world).run_once() == queued.id
    finished = job(world, queued.id)
    assert finished.state == "completed", finished.error
    assert len(seen_items) == len(keys)

    archive = _download(world, queued.id)
    manifest = json.loads(archive.read("manifest.json"))
    items = {item["key"]: item for item in manifest["items"]}
    assert set(items) == set(keys)
    files = {name for name in archive.namelist() if name != "manifest.json"}
    assert files == {item["file"] for item in items.values() if item["file"] is not None}
    for item in items.values():
        if item["status"] != "exported":
            assert (item["file"], item["file_sha256"], item["hash_verified"]) == \
                (None, None, False)
            continue
        data = archive.read(item["file"])
        digest = hashlib.sha256(data).hexdigest()
        # the file, the manifest's file hash and the recorded content hash: one value
        assert item["file_sha256"] == digest
        assert item["content_sha256"] == digest
        assert item["hash_verified"] is True
        assert item["content_size"] == len(data)
        value = json.loads(data)
        assert value["k"] == item["key"]
        assert item["version"] == value["v"] + 1
    # the two it had read before the meddling went out as they were then; the one deleted
    # ahead of it is reported deleted, the one overwritten ahead goes out in its new version
    assert items[overwritten_behind]["status"] == "exported"
    assert json.loads(archive.read(items[overwritten_behind]["file"]))["v"] == 0
    assert items[deleted_behind]["status"] == "exported"
    assert items[deleted_ahead]["status"] == "deleted_during_export"
    assert items[overwritten_ahead]["status"] == "exported"
    assert json.loads(archive.read(items[overwritten_ahead]["file"]))["v"] == 1
    counts = manifest["counts"]
    assert (counts["pointers"], counts["exported"], counts["deleted_during_export"],
            counts["missing"], counts["corrupt"]) == (6, 5, 1, 0, 0)
    assert counts["bytes"] == sum(item["content_size"] for item in items.values()
                                  if item["status"] == "exported")
    # nothing was marked corrupt by the race
    assert {p.sync_status for p in _pointers(world)} == {"synced"}
