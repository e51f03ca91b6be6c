"""One writer of a tenant's tlog checkpoints at a time (``control_plane/audit/tlog_anchor.py``,
``claim``/``release``): a second writer that starts while the first has not recorded its size
writes nothing, so the bucket never holds two checkpoints with no consistency proof between
them; a lease that ran out is taken over; a move of the anchor waits for the writer. Exact
outcomes on an embedded database and a local bucket (``checkpoint_world.py``), no server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from control_plane.audit import tlog_anchor, tree
from control_plane.db.base import utcnow
from control_plane.tlog import merkle
from tests.unit.checkpoint_world import World, down, make_world
from tests.unit.test_tlog_anchor_cases import _files, _publish, cp, proof_name


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _consistent(world: World, first: int, second: int) -> bool:
    """The proof in the bucket from ``first`` to ``second`` verifies against the two roots."""
    with world.sessions() as session:
        hashes = tree.consistency(session, world.tenant, first, second)
        roots = tree.head(session, world.tenant, first)[1], tree.head(session, world.tenant,
                                                                      second)[1]
    return merkle.verify_consistency(first, second, *roots, hashes)


def test_a_writer_that_starts_while_another_writes_writes_nothing_and_the_chain_stays_whole(
        world: World) -> None:
    first = world.append(3)
    assert _publish(world, 0, interval=False) is True
    second = world.append(2)
    reached, go = threading.Event(), threading.Event()

    def hold(step: str) -> None:
        if step == "tlog:claimed" and not reached.is_set():
            reached.set()
            assert go.wait(30)

    world.plane.checkpoint = hold
    outcome: list[bool] = []
    writer = threading.Thread(target=lambda: outcome.append(_publish(world, 1, interval=False)))
    writer.start()
    try:
        assert reached.wait(30)
        third = world.append(2)  # the tree grows while the first writer is between its steps
        assert _publish(world, 2, interval=False) is False  # it holds the tenant's head
        assert _files(world) == [cp(first)]
        assert world.head().tlog_size == first
    finally:
        go.set()
        writer.join(30)
    assert outcome == [True]
    assert (world.head().tlog_size, world.head().tlog_claimed_until) == (second, None)
    assert _publish(world, 3, interval=False) is True
    assert _files(world) == [cp(first), cp(second), cp(third),
                             proof_name(first, second), proof_name(second, third)]
    assert _consistent(world, first, second) and _consistent(world, second, third)


def test_a_lease_that_ran_out_is_taken_over_and_one_still_held_is_not(world: World) -> None:
    size = world.append(3)
    held = utcnow() + timedelta(seconds=60)
    world.set_head(tlog_claimed_until=held)
    assert _publish(world, 0, interval=False) is False
    assert (world.head().tlog_size, world.head().tlog_claimed_until) == (0, held)
    world.set_head(tlog_claimed_until=utcnow() - timedelta(seconds=1))  # its writer died
    assert _publish(world, 1, interval=False) is True
    assert (world.head().tlog_size, world.head().tlog_claimed_until) == (size, None)
    assert _files(world) == [cp(size)]


def test_a_writer_lets_go_of_the_lease_when_the_bucket_refuses_and_records_nothing(
        world: World) -> None:
    world.append(3)
    world.plane.faults["put:/tlog/checkpoint/"] = down
    assert _publish(world, 0, interval=False) is False
    assert (world.head().tlog_size, world.head().tlog_claimed_until) == (0, None)


def test_a_release_leaves_a_lease_another_writer_took_after_this_one_ran_out(
        world: World) -> None:
    world.append(3)
    with world.sessions() as session:
        before = utcnow()
        mine = tlog_anchor.claim(session, world.tenant)
        assert mine is not None
        assert before + timedelta(seconds=120) <= mine <= utcnow() + timedelta(seconds=120)
        theirs = utcnow() + timedelta(seconds=90)
        world.set_head(tlog_claimed_until=theirs)  # mine ran out; another writer took it
        tlog_anchor.release(session, world.tenant, mine, 3)
    assert (world.head().tlog_size, world.head().tlog_claimed_until) == (3, theirs)


def test_a_move_waits_for_the_writer_that_holds_the_head(world: World) -> None:
    world.append(3)
    pauses: list[float] = []
    with world.sessions() as writer, world.sessions() as mover:
        held = tlog_anchor.claim(writer, world.tenant)
        assert held is not None

        def pause(seconds: float) -> None:
            pauses.append(seconds)
            if len(pauses) == 2:  # the writer finishes while the move waits
                tlog_anchor.release(writer, world.tenant, held, 3)

        until = tlog_anchor.wait_for_claim(mover, world.tenant, pause=pause)
    assert pauses == [0.05, 0.05]
    assert until > held - tlog_anchor.LEASE
    assert world.head().tlog_claimed_until == until
    assert world.head().tlog_size == 3


def test_a_move_that_fails_lets_go_of_the_lease_and_records_nothing(world: World) -> None:
    from storage_adapters import base as storage
    from tests.unit.test_audit_anchor_moves_cases import _move, _place

    last = world.append(3)
    assert _publish(world, 0, interval=False) is True
    world.plane.faults["put:/tlog/"] = down  # the old place and the root alike
    with pytest.raises(storage.StorageUnavailable):
        _move(world, last, _place(world, "new"))
    assert (world.head().tlog_size, world.head().tlog_claimed_until) == (last, None)
    del world.plane.faults["put:/tlog/"]
    assert _publish(world, 1, interval=False) is True  # the next writer is not kept out
    assert world.head().tlog_size == last + 1
