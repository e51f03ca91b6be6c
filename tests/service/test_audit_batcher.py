"""The read-audit batcher (group commit, I6): no read is answered without its durable row.

Each race is held at the batcher's named checkpoints (``batcher.checkpoint``): a leader
stopped before its commit while followers queue behind it, a follower whose wait runs out,
a connection killed between two batches. Real databases, real failures (a row the
database refuses, a backend terminated by PostgreSQL).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import select, text

from control_plane.audit import batcher as batcher_module
from control_plane.audit.batcher import AuditBatcher
from control_plane.db.models import AccessLog
from tests.support.service import ServiceWorld

WAIT = 60  # seconds: only a deadlock ever waits this long


@dataclass
class Steps:
    """Which thread reached which checkpoint, and gates that hold a thread at a step."""

    seen: list[tuple[str, str]] = field(default_factory=list)
    gates: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    arrived: dict[tuple[str, str], threading.Event] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hold(self, thread: str, step: str) -> threading.Event:
        """Stop ``thread`` at its next ``step`` until the returned event is set."""
        gate = self.gates[(thread, step)] = threading.Event()
        return gate

    def reached(self, thread: str, step: str) -> threading.Event:
        with self.lock:
            return self.arrived.setdefault((thread, step), threading.Event())

    def __call__(self, step: str) -> None:
        name = threading.current_thread().name
        with self.lock:
            self.seen.append((name, step))
            gate = self.gates.pop((name, step), None)
            arrived = self.arrived.setdefault((name, step), threading.Event())
        arrived.set()
        if gate is not None:
            assert gate.wait(WAIT), f"{name} was held at {step} and never released"


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Steps:
    s = Steps()
    monkeypatch.setattr(batcher_module, "checkpoint", s)
    return s


@pytest.fixture
def batcher(world: ServiceWorld) -> Iterator[AuditBatcher]:
    b = AuditBatcher(world.runtime.engine)
    yield b
    b.close()


class Reader(threading.Thread):
    """One read's audit row: ``outcome`` is None once it returned, or the error it raised;
    ``durable`` whether its row was in the database when record() returned."""

    def __init__(self, world: ServiceWorld, batcher: AuditBatcher, name: str, *,
                 tenant_id: uuid.UUID | None = None, timeout: float = WAIT) -> None:
        super().__init__(name=f"{name}-{uuid.uuid4().hex[:6]}", daemon=True)
        self.world, self.batcher, self.label = world, batcher, name
        self.tenant_id, self.timeout = tenant_id or world.tenant_id, timeout
        self.outcome: BaseException | None | str = "not finished"
        self.durable: bool | None = None

    def run(self) -> None:
        try:
            self.batcher.record(self.tenant_id, "api", "reader", "read",
                                detail=self.label, timeout=self.timeout)
        except BaseException as exc:  # the test looks at it
            self.outcome = exc
            return
        self.outcome = None
        self.durable = self.label in details(self.world)

    def finish(self) -> BaseException | None | str:
        self.join(WAIT)
        assert not self.is_alive(), f"{self.label} never returned"
        return self.outcome


def details(world: ServiceWorld) -> list[str]:
    with world.runtime.engine.connect() as conn:
        return sorted(conn.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "read")))


def start_held_leader(world: ServiceWorld, batcher: AuditBatcher, steps: Steps,
                      step: str = "commit") -> tuple[Reader, threading.Event]:
    leader = Reader(world, batcher, "leader")
    release = steps.hold(leader.name, step)
    leader.start()
    assert steps.reached(leader.name, step).wait(WAIT)
    return leader, release


def queue(world: ServiceWorld, batcher: AuditBatcher, steps: Steps, *labels: str,
          tenant_ids: dict[str, uuid.UUID] | None = None, timeout: float = WAIT) -> list[Reader]:
    readers = []
    for label in labels:
        reader = Reader(world, batcher, label, timeout=timeout,
                        tenant_id=(tenant_ids or {}).get(label))
        reader.start()
        assert steps.reached(reader.name, "queued").wait(WAIT)  # its row is in the queue
        readers.append(reader)
    return readers


def test_a_failed_group_commit_fails_every_waiting_read(
        world: ServiceWorld, batcher: AuditBatcher, steps: Steps) -> None:
    leader, release = start_held_leader(world, batcher, steps)
    # Three reads queue behind it; one row names a tenant that does not exist, so the
    # database refuses the batch the three share (a foreign key, checked at commit).
    a, b, c = queue(world, batcher, steps, "a", "b", "c",
                    tenant_ids={"b": uuid.uuid4()})
    release.set()
    assert leader.finish() is None and leader.durable is True
    outcomes = [r.finish() for r in (a, b, c)]
    assert [type(o) for o in outcomes] == [sa_exc.IntegrityError] * 3
    # None of them was answered, and none of their rows is there (a and c were sound rows,
    # refused with the batch).
    assert details(world) == ["leader"]
    # The first queued reader led the failed batch: two commits in all.
    commits = [name for name, step in steps.seen if step == "commit"]
    assert commits == [leader.name, a.name]
    # The batcher carries on: the next read commits on a fresh connection.
    [d] = queue(world, batcher, steps, "d")
    assert d.finish() is None and d.durable is True
    assert details(world) == ["d", "leader"]


def test_the_leader_hands_off_to_the_first_queued_read_and_every_read_waits_for_its_row(
        world: ServiceWorld, batcher: AuditBatcher, steps: Steps) -> None:
    leader, release = start_held_leader(world, batcher, steps)
    followers = queue(world, batcher, steps, "f1", "f2", "f3")
    release.set()
    assert leader.finish() is None
    assert [r.finish() for r in followers] == [None, None, None]
    # Each returned only once its own row could be read back.
    assert [r.durable for r in (leader, *followers)] == [True] * 4
    commits = [name for name, step in steps.seen if step == "commit"]
    assert commits == [leader.name, followers[0].name]  # one batch of 1, one of 3
    assert details(world) == ["f1", "f2", "f3", "leader"]
    assert (batcher._leading, batcher._queue) == (False, [])


def test_a_read_whose_wait_runs_out_in_the_queue_is_refused_and_its_row_never_lands(
        world: ServiceWorld, batcher: AuditBatcher, steps: Steps) -> None:
    leader, release = start_held_leader(world, batcher, steps)
    [late] = queue(world, batcher, steps, "late", timeout=0.01)
    assert steps.reached(late.name, "timed-out").wait(WAIT)
    outcome = late.finish()  # the leader is still held: nothing committed its row
    assert isinstance(outcome, TimeoutError)
    assert str(outcome) == "the audit row was not committed in time"
    release.set()
    assert leader.finish() is None
    [after] = queue(world, batcher, steps, "after")
    assert after.finish() is None
    assert details(world) == ["after", "leader"]  # the refused read left no row
    assert (batcher._leading, batcher._queue) == (False, [])


def test_a_read_whose_wait_runs_out_while_its_row_is_being_committed_waits_for_it(
        world: ServiceWorld, batcher: AuditBatcher, steps: Steps) -> None:
    # The leader is held after queueing its row, before it takes a batch: the follower's
    # row joins the leader's batch, which is then held at its commit.
    leader, at_queue = start_held_leader(world, batcher, steps, step="queued")
    commit_gate = steps.hold(leader.name, "commit")
    [follower] = queue(world, batcher, steps, "follower", timeout=0.01)
    at_queue.set()
    assert steps.reached(leader.name, "commit").wait(WAIT)
    assert steps.reached(follower.name, "timed-out").wait(WAIT)
    assert follower.outcome == "not finished"  # its row is in flight: it keeps waiting
    commit_gate.set()
    assert leader.finish() is None
    assert follower.finish() is None and follower.durable is True
    assert [n for n, s in steps.seen if s == "commit"] == [leader.name]  # one batch of 2
    assert details(world) == ["follower", "leader"]


def _backend_pid(batcher: AuditBatcher) -> int:
    conn = batcher._conn
    assert conn is not None
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


@pytest.mark.databases("postgres")
def test_a_batch_on_a_connection_the_server_closed_commits_on_a_fresh_one(
        world: ServiceWorld, batcher: AuditBatcher, steps: Steps) -> None:
    """The batcher keeps one connection for its batches; the server (a restart, an idle
    timeout, an operator) may close it between two. The next batch must not fail the reads
    because of a connection that was already gone before it started."""

    leader = Reader(world, batcher, "one")
    release = steps.hold(leader.name, "queued")
    leader.start()
    assert steps.reached(leader.name, "queued").wait(WAIT)
    [two] = queue(world, batcher, steps, "two")
    release.set()
    assert (leader.finish(), two.finish()) == (None, None)
    old_pid = _backend_pid(batcher)
    with world.runtime.engine.connect() as conn:
        assert conn.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": old_pid})
        conn.commit()

    leader = Reader(world, batcher, "three")
    release = steps.hold(leader.name, "queued")
    leader.start()
    assert steps.reached(leader.name, "queued").wait(WAIT)
    [four] = queue(world, batcher, steps, "four")
    release.set()
    assert (leader.finish(), four.finish()) == (None, None)
    assert (leader.durable, four.durable) == (True, True)
    assert details(world) == ["four", "one", "three", "two"]
    assert _backend_pid(batcher) != old_pid


def test_a_batch_lands_each_row_as_queued_and_the_sealer_chains_it(
        world: ServiceWorld, batcher: AuditBatcher, steps: Steps,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's rows go in as one statement (one array per column on PostgreSQL): each row
    keeps its own values, NULLs included, and the chain over them verifies."""
    from control_plane.audit import service as audit
    from control_plane.kit import request_id_var

    at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    monkeypatch.setattr(batcher_module, "utcnow", lambda: at)
    pointers = [uuid.uuid4(), None, uuid.uuid4()]
    queued = [("p0", pointers[0], "agent-a", "req-0"), ("p1", None, None, None),
              ("p2", pointers[2], None, "req-2")]

    def record(label: str, pointer: uuid.UUID | None, agent: str | None,
               request: str | None) -> None:
        request_id_var.set(request)
        batcher.record(world.tenant_id, "key", "k1", "read", pointer_id=pointer,
                       detail=label, agent_id=agent)

    leader, release = start_held_leader(world, batcher, steps)
    threads = []
    for args in queued:
        thread = threading.Thread(target=record, args=args,
                                  name=f"{args[0]}-{uuid.uuid4().hex[:6]}")
        thread.start()
        assert steps.reached(thread.name, "queued").wait(WAIT)
        threads.append(thread)
    release.set()
    assert leader.finish() is None
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    commits = [name for name, step in steps.seen if step == "commit"]
    assert commits == [leader.name, threads[0].name]  # the three in one batch
    with world.runtime.engine.connect() as conn:
        rows = conn.execute(
            select(AccessLog.detail, AccessLog.pointer_id, AccessLog.event_id,
                   AccessLog.accessor_type, AccessLog.accessor_id, AccessLog.agent_id,
                   AccessLog.operation, AccessLog.success, AccessLog.request_id,
                   AccessLog.accessed_at)
            .where(AccessLog.tenant_id == world.tenant_id, AccessLog.detail.like("p%"))
            .order_by(AccessLog.id)).all()
    assert [tuple(r) for r in rows] == [
        (label, pointer, None, "key", "k1", agent, "read", True, request, at)
        for label, pointer, agent, request in queued]
    with world.runtime.sessions() as session:
        unsealed = session.scalars(select(AccessLog.detail).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.seq.is_(None))).all()
        assert {"leader", "p0", "p1", "p2"} <= set(unsealed)
        assert audit.seal(session, world.tenant_id) == len(unsealed)
        assert audit.verify(session, world.tenant_id).ok


def test_reads_gathered_together_land_in_one_commit_when_the_block_ends(
        world: ServiceWorld) -> None:
    """Inside ``reads_committed_together`` an actor's read rows wait for the block's end (one
    commit, before the caller answers); another actor's land at once; rows gathered before an
    error land too."""
    from control_plane.audit import service as audit
    from control_plane.identity import Actor

    plane = world.runtime.plane
    me, other = world.actor, Actor(world.tenant_id, "api", "someone-else")

    def details() -> list[tuple[str, str]]:
        with world.runtime.sessions() as session:
            return [(r.accessor_id, r.detail) for r in session.execute(
                select(AccessLog.accessor_id, AccessLog.detail).where(
                    AccessLog.tenant_id == world.tenant_id,
                    AccessLog.operation.in_(["search", "read", "context"]))
                .order_by(AccessLog.id))]

    with world.runtime.sessions() as session:
        with audit.reads_committed_together(session, plane, me):
            audit.commit_reads(session, plane, me, [("search", None, "s1")])
            audit.commit_reads(session, plane, other, [("read", None, "theirs")])
            with audit.reads_committed_together(session, plane, me):  # nested: the outer
                audit.commit_reads(session, plane, me, [("read", None, "r1")])
            audit.commit_reads(session, plane, me, [("context", None, "c1")])
            inside = details()
        after = details()
        with pytest.raises(RuntimeError, match="assembly failed"):
            with audit.reads_committed_together(session, plane, me):
                audit.commit_reads(session, plane, me, [("read", None, "r2")])
                assert details() == after
                raise RuntimeError("assembly failed")
        failed = details()
    mine = me.accessor_id
    assert inside == [("someone-else", "theirs")]
    assert after == [("someone-else", "theirs"), (mine, "s1"), (mine, "r1"), (mine, "c1")]
    assert failed == after + [(mine, "r2")]
