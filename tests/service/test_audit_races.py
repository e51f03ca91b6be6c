"""Audit chain races, made deterministic with the checkpoints in ``audit.service``.

- ``verify`` racing the sealer: the head and the rows are read in one snapshot.
- two sealers (two replicas) and writers committing meanwhile: no gap, no row sealed twice.
- ``GET /v1/audit`` paging: a row whose id was minted early but which commits late is on a
  later page, never skipped.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from control_plane.audit import service as audit
from control_plane.db.models import AccessLog, AuditHead
from tests.support.service import ServiceWorld

WAIT = 60  # seconds: only a deadlock ever waits this long


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Callable[[], None]]]:
    """Named steps -> what runs there, once, in the first of the test's own threads to reach
    it: the test thread or one it named ``race-…``. A sealer running in the background for
    another runtime in this process passes through untouched."""
    table: dict[str, Callable[[], None]] = {}
    lock = threading.Lock()
    main = threading.current_thread()

    def checkpoint(step: str) -> None:
        here = threading.current_thread()
        if here is not main and not here.name.startswith("race-"):
            return
        with lock:
            action = table.pop(step, None)
        if action is not None:
            action()

    monkeypatch.setattr(audit, "checkpoint", checkpoint)
    yield table


def _write_rows(world: ServiceWorld, n: int, operation: str = "race-probe") -> None:
    with world.runtime.sessions() as session:
        for i in range(n):
            audit.record(session, world.actor, operation, detail=f"row {i}")
        session.commit()


def _seal(world: ServiceWorld) -> int:
    with world.runtime.sessions() as session:
        return audit.seal(session, world.tenant_id)


def _chain(world: ServiceWorld) -> list[tuple[int, int | None]]:
    with world.runtime.sessions() as session:
        return [(r.id, r.seq) for r in session.execute(
            select(AccessLog.id, AccessLog.seq).where(AccessLog.tenant_id == world.tenant_id)
            .order_by(AccessLog.id))]


def test_verify_is_not_fooled_by_a_seal_between_reading_the_head_and_the_rows(
        world: ServiceWorld, hooks: dict[str, Callable[[], None]]) -> None:
    _write_rows(world, 5)
    _seal(world)
    with world.runtime.sessions() as session:
        before = session.get(AuditHead, world.tenant_id)
        assert before is not None
        head_seq = before.last_seq
    _write_rows(world, 3)

    sealed_meanwhile: list[int] = []
    # Right after verify has read the head, another replica's sealer chains 3 more rows.
    hooks["verify:head-read"] = lambda: sealed_meanwhile.append(_seal(world))
    with world.runtime.sessions() as session:
        result = audit.verify(session, world.tenant_id)
    assert sealed_meanwhile == [3]
    # The chain as of the head verify read: consistent, not "ends at row N+3 but was sealed
    # up to N".
    assert (result.ok, result.problem, result.first_bad_seq) == (True, None, None)
    assert (result.checked, result.head_seq, result.unsealed) == (head_seq, head_seq, 3)
    with world.runtime.sessions() as session:
        again = audit.verify(session, world.tenant_id)
    assert (again.ok, again.checked, again.head_seq, again.unsealed) == (
        True, head_seq + 3, head_seq + 3, 0)


def _waiting_on_a_lock(world: ServiceWorld, application_name: str) -> bool:
    with world.runtime.engine.connect() as conn:
        return bool(conn.scalar(text(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name "
            "AND wait_event_type = 'Lock'"), {"name": application_name}))


@pytest.mark.databases("postgres")
def test_two_sealers_and_writers_meanwhile_leave_no_gap_and_no_row_sealed_twice(
        world: ServiceWorld, hooks: dict[str, Callable[[], None]]) -> None:
    """Replica A holds the head and has read the unsealed rows; writers commit more (one
    with an id older than theirs commits last); replica B queues on the head's lock. A
    commits, then B seals exactly what A did not read, and the late row comes last."""
    _write_rows(world, 4)
    engine = world.runtime.engine
    a_holds_head, release_a = threading.Event(), threading.Event()
    counts: dict[str, int] = {}
    errors: list[BaseException] = []

    def a_paused() -> None:
        a_holds_head.set()
        assert release_a.wait(WAIT)

    hooks["seal:rows-read"] = a_paused

    def sealer(name: str) -> None:
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"SET application_name = '{name}'")
                conn.commit()
                with Session(bind=conn, expire_on_commit=False) as session:
                    counts[name] = audit.seal(session, world.tenant_id)
        except BaseException as exc:  # reported by the assertions below
            errors.append(exc)

    a = threading.Thread(target=sealer, args=(f"sealer-a-{uuid.uuid4().hex[:6]}",),
                         name="race-sealer-a")
    a.start()
    late = world.runtime.sessions()
    try:
        assert a_holds_head.wait(WAIT)
        # An id minted now, committed only after A has sealed newer rows.
        audit.record(late, world.actor, "race-probe", detail="late")
        late.flush()
        _write_rows(world, 3)  # committed while A holds the head
        b_name = f"sealer-b-{uuid.uuid4().hex[:6]}"
        b = threading.Thread(target=sealer, args=(b_name,), name="race-sealer-b")
        b.start()
        tick = threading.Event()  # never set: wait() paces the polling loop below
        for _ in range(6000):  # until B is queued on the head's lock, held by A
            if _waiting_on_a_lock(world, b_name):
                break
            assert errors == []
            assert b.is_alive(), "the second sealer finished while the first held the head"
            tick.wait(0.01)
        else:
            pytest.fail("the second sealer never queued on the head's lock")
        release_a.set()
        a.join(WAIT)
        b.join(WAIT)
        late.commit()
    finally:  # a failed assertion must not leave A parked or the late session open
        release_a.set()
        a.join(WAIT)
        late.close()
    assert errors == []
    # B sealed the 3 written after A read its rows, nothing A had sealed.
    a_count, b_count = (counts[k] for k in sorted(counts))
    assert b_count == 3
    after_late = _seal(world)
    assert after_late == 1  # the late row, sealed after the rows that committed before it
    chain = _chain(world)
    seqs = sorted(seq for _, seq in chain if seq is not None)
    assert seqs == list(range(1, len(chain) + 1))  # no gap, no seq twice, none left unsealed
    assert len(chain) == a_count + b_count + after_late
    late_id, late_seq = next((i, s) for i, s in chain if s == seqs[-1])
    assert late_id < max(i for i, _ in chain)  # its id is older than rows sealed before it
    with world.runtime.sessions() as session:
        result = audit.verify(session, world.tenant_id)
        head = session.get(AuditHead, world.tenant_id)
    assert (result.ok, result.checked, result.unsealed) == (True, len(chain), 0)
    assert head is not None and head.last_seq == late_seq == len(chain)


@pytest.mark.databases("postgres")
def test_audit_paging_never_skips_a_row_that_commits_late_with_a_lower_id(
        world: ServiceWorld) -> None:
    sessions = world.runtime.sessions
    late = sessions()
    audit.record(late, world.actor, "race-probe", detail="late")
    late.flush()  # its id is minted now; it commits after the rows below
    _write_rows(world, 3)

    def page(cursor: str | None, limit: int) -> tuple[list[str], str | None]:
        with sessions() as session:
            rows, nxt = audit.query_page(
                session, world.actor, pointer_id=None, accessor_id=None,
                operation="race-probe", since=None, until=None, cursor=cursor, limit=limit)
        return [r.detail for r in rows], nxt

    first, cursor = page(None, 2)
    assert first == ["row 0", "row 1"]
    assert cursor is not None
    late.commit()
    late.close()
    seen, pages = list(first), 1
    while cursor is not None:
        more, cursor = page(cursor, 2)
        seen += more
        pages += 1
    assert seen == ["row 0", "row 1", "row 2", "late"]
    assert pages == 2
    with sessions() as session:
        late_id = session.scalar(select(func.min(AccessLog.id)).where(
            AccessLog.tenant_id == world.tenant_id, AccessLog.operation == "race-probe"))
        late_detail = session.scalar(select(AccessLog.detail).where(AccessLog.id == late_id))
    assert late_detail == "late"  # the lowest id of the four, yet shown last
