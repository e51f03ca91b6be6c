"""Which places ``anchors.survey`` reads and what stops it (the root first, every configuration
of the tenant, every place a move record names; a required place that cannot be read, a move
to a configuration the database lost or changed), and which checkpoint ``anchors.unlinked``
names as continuing in another place without a signed record of the move. Exact outcomes on
an embedded database and a local bucket (``checkpoint_world.py``), no server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from control_plane.audit import anchors
from control_plane.audit.anchors import Found, Place, Survey
from control_plane.db.engine import begin_write
from control_plane.db.models import StorageConfig
from tests.unit.checkpoint_world import World, down, make_world
from tests.unit.test_audit_anchors_reading import body, local_config, root_place


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def _survey(world: World, active: uuid.UUID | None = None) -> Survey:
    active = active or world.config()
    with world.sessions() as session:
        return anchors.survey(session, world.plane, world.key, world.tenant, active,
                              lambda exc: f"code-{type(exc).__name__}")


def _name(seq: int, moved: bool = False) -> str:
    return anchors.checkpoint_name(seq, moved=moved)


def _down_below(prefix: str):  # type: ignore[no-untyped-def]
    def fault(path: str) -> None:
        if path.startswith(prefix):
            down(path)
    return fault


def test_the_root_is_read_once_and_what_is_found_sorts_by_seq_move_records_first(
        world: World) -> None:
    there = f"tenants/{world.tenant}/there"
    world.sign_into(body(world, 1), _name(1))
    world.sign_into(body(world, 5, moved_to=world.place(None, there)), _name(5, moved=True))
    world.sign_into(body(world, 5, prev_seq=1, anchor=world.place(None, there)), _name(5), there)
    world.sign_into(body(world, 3, moved_to="nowhere"), _name(3, moved=True))
    (world.folder() / _name(7, moved=True)).write_text("damaged")
    found = _survey(world)
    there_place = Place("default", None, None, there)
    assert found.read == {root_place(world): None, there_place: None}
    assert list(found.read) == [root_place(world), there_place]
    assert [(f.seq, f.moved, f.place, f.problem) for f in found.found] == [
        (1, False, root_place(world), None), (3, True, root_place(world), None),
        (5, True, root_place(world), None), (5, False, there_place, None),
        (7, True, root_place(world),
         "checkpoint 7 in the bucket is not a well-formed checkpoint")]
    assert (found.unreadable, found.problem, found.bad) == ([], None, None)


def test_a_retired_bucket_that_cannot_be_read_is_noted_unless_a_move_record_names_it(
        world: World, tmp_path: Path) -> None:
    own = local_config(world, tmp_path / "own")
    world.plane.faults["list:audit/checkpoints/"] = _down_below("audit/")
    found = _survey(world)
    assert (found.unreadable, found.problem, list(found.read)) == (
        [f"storage configuration sc_{own.hex}"], None, [root_place(world)])
    moved_to = Place("local", str(tmp_path / "own"), None, "p").describe(own)
    world.sign_into(body(world, 2, moved_to=moved_to), _name(2, moved=True))
    found = _survey(world)
    assert found.problem == (
        f"the checkpoints in storage configuration sc_{own.hex} could not be read "
        "(code-StorageUnavailable); retry when the bucket is reachable")
    assert found.unreadable == [f"storage configuration sc_{own.hex}"]
    del world.plane.faults["list:audit/checkpoints/"]
    found = _survey(world)
    assert (found.unreadable, found.problem, found.read) == (
        [], None, {root_place(world): None, Place("local", str(tmp_path / "own"), None, "p"):
                   own})


def test_the_root_and_the_active_place_must_be_read_the_root_first(world: World) -> None:
    first = world.config()
    moved = world.move_to()
    root = f"the operator's default bucket at 'tenants/{world.tenant}'"
    world.plane.faults["list:audit/checkpoints/"] = _down_below(f"tenants/{world.tenant}/")
    found = _survey(world, moved)
    assert (found.problem, found.read, found.found) == (
        f"the checkpoints in {root} could not be read (code-StorageUnavailable); retry when "
        "the bucket is reachable", {}, [])
    world.plane.faults["list:audit/checkpoints/"] = _down_below(
        f"tenants/{world.tenant}/moved/")
    found = _survey(world, moved)
    assert (found.problem, found.read) == (
        f"the checkpoints in the operator's default bucket at 'tenants/{world.tenant}/moved' "
        "could not be read (code-StorageUnavailable); retry when the bucket is reachable",
        {root_place(world): None})
    # while it is not the active place, it need not be read
    found = _survey(world, first)
    assert (found.problem, found.unreadable) == (
        None, [f"the operator's default bucket at 'tenants/{world.tenant}/moved'"])


@pytest.mark.parametrize("case", ["unknown id", "no id", "changed"])
def test_a_move_to_a_configuration_the_database_lost_or_changed_stops_the_survey(
        world: World, tmp_path: Path, case: str) -> None:
    own = local_config(world, tmp_path / "own")
    place = Place("local", str(tmp_path / "own"), None, "p")
    named = {"unknown id": place.describe(uuid.UUID(int=77)), "no id": place.describe(None),
             "changed": place.describe(own)}[case]
    if case == "changed":
        with world.sessions() as session:
            begin_write(session)
            session.execute(update(StorageConfig).where(StorageConfig.id == own)
                            .values(bucket=str(tmp_path / "elsewhere")))
            session.commit()
    world.sign_into(body(world, 4, moved_to=named), _name(4, moved=True))
    found = _survey(world)
    where = f"checkpoint 4 in the operator's default bucket at 'tenants/{world.tenant}' " \
            "records that the anchor moved to storage configuration "
    assert found.problem == {
        "unknown id": f"{where}sc_{uuid.UUID(int=77).hex}, a storage configuration the "
                      "database no longer has: configurations were removed",
        "no id": f"{where}(unknown), a storage configuration the database no longer has: "
                 "configurations were removed",
        "changed": f"{where}sc_{own.hex}, but the database's configuration no longer names "
                   "that bucket: the configuration was changed"}[case]
    assert found.bad is not None and (found.bad.seq, found.bad.moved) == (4, True)
    assert found.bad.body is not None and found.bad.body["moved_to"] == named


# -- unlinked ----------------------------------------------------------------------------------

ROOT = Place("default", None, None, "tenants/t")
A = Place("default", None, None, "a-place")
B = Place("s3", "b", None, "p")
B_ID = uuid.UUID(int=11)
IDS: dict[Place, uuid.UUID | None] = {ROOT: None, A: None, B: B_ID}


def cp(seq: int, place: Place, prev: Any, *, came: Place | None = None,
       moved_to: Place | None = None, anchor: bool = True, problem: str | None = None,
       has_body: bool = True) -> Found:
    content: dict[str, Any] = {"seq": seq, "prev_seq": prev}
    if anchor:
        content["anchor"] = place.describe(IDS.get(place))
    if came is not None:
        content["moved_from"] = came.describe(IDS.get(came))
    if moved_to is not None:
        content["moved_to"] = moved_to.describe(IDS.get(moved_to))
    return Found(seq, moved_to is not None, place, IDS.get(place),
                 content if has_body else None, problem)


def _unlinked(*found: Found) -> tuple[int, bool, str] | None:
    result = anchors.unlinked(list(found), ROOT, IDS)
    return None if result is None else (result[0].seq, result[0].moved, result[1])


def _said(seq: int, where: str, since: str, source: str) -> str:
    return (f"checkpoint {seq} in {where} continues from {since} in {source}, but no signed "
            "record of the anchor moving there was found: the anchor was moved by editing "
            "the database")


ROOT_LABEL = "the operator's default bucket at 'tenants/t'"
A_LABEL = "the operator's default bucket at 'a-place'"
B_LABEL = f"storage configuration sc_{B_ID.hex}"


def test_a_chain_in_one_place_and_recorded_moves_are_linked() -> None:
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2), cp(6, ROOT, 4)) is None
    assert _unlinked(cp(2, A, 0, came=ROOT), cp(2, ROOT, 0, moved_to=A)) is None
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=B), cp(4, B, 2, came=ROOT),
                     cp(6, ROOT, 4, moved_to=A), cp(6, A, 4, came=B)) is None
    # the move record in the place the anchor left, not the root
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=B), cp(4, B, 2, came=ROOT),
                     cp(6, B, 4, moved_to=A), cp(6, A, 4, came=B)) is None


def test_a_checkpoint_elsewhere_without_its_move_record_is_named() -> None:
    assert _unlinked(cp(2, A, 0)) == (2, False, _said(2, A_LABEL, "the start of the chain",
                                                       ROOT_LABEL))
    assert _unlinked(cp(2, ROOT, 0), cp(4, B, 2, came=ROOT)) == (
        4, False, _said(4, B_LABEL, "checkpoint 2", ROOT_LABEL))
    # the move record in a third place, naming another place, or under a problem
    assert _unlinked(cp(2, ROOT, 0), cp(4, B, 2, moved_to=A), cp(4, A, 2, came=ROOT)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", ROOT_LABEL))
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=B), cp(4, A, 2, came=ROOT)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", ROOT_LABEL))
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=A, problem="x"),
                     cp(4, A, 2, came=ROOT)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", ROOT_LABEL))
    # the move record at another seq
    assert _unlinked(cp(2, ROOT, 0), cp(3, ROOT, 2, moved_to=A), cp(4, A, 2, came=ROOT)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", ROOT_LABEL))


def test_where_the_new_place_says_it_came_from_must_hold_the_predecessor() -> None:
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=A), cp(4, A, 2, came=B)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", ROOT_LABEL))
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=A), cp(4, A, 2)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", ROOT_LABEL))
    # a move record in the root stands for one the place it left refused
    assert _unlinked(cp(2, B, 0), cp(4, ROOT, 2, moved_to=A), cp(4, A, 2, came=B)) == (
        2, False, _said(2, B_LABEL, "the start of the chain", ROOT_LABEL))
    assert _unlinked(cp(2, B, 0, anchor=False), cp(4, ROOT, 2, moved_to=A),
                     cp(4, A, 2, came=B)) is None


def test_a_move_record_continuing_elsewhere_is_itself_held_to_nothing() -> None:
    assert _unlinked(cp(2, ROOT, 0), cp(4, ROOT, 2, moved_to=B), cp(4, B, 2, came=ROOT),
                     cp(6, ROOT, 4, moved_to=A), cp(6, A, 4, came=B),
                     cp(8, ROOT, 6, moved_to=B)) is None


def test_what_cannot_be_linked_is_left_to_the_chain_check() -> None:
    assert _unlinked(cp(2, A, 0, anchor=False)) is None  # written before places were named
    assert _unlinked(cp(2, A, None), cp(4, A, "2")) is None
    assert _unlinked(cp(2, ROOT, 0), cp(6, A, 4)) is None  # predecessor missing
    assert _unlinked(cp(2, A, 0, problem="damaged")) is None
    assert _unlinked(cp(2, A, 0, has_body=False, problem="damaged")) is None
    assert _unlinked(cp(2, A, 0, has_body=False)) is None
    # and what follows them is still held to its move
    assert _unlinked(cp(1, ROOT, "x"), cp(2, A, 0)) == (
        2, False, _said(2, A_LABEL, "the start of the chain", ROOT_LABEL))
    assert _unlinked(cp(1, ROOT, 0, anchor=False), cp(2, A, 0)) == (
        2, False, _said(2, A_LABEL, "the start of the chain", ROOT_LABEL))


def test_the_first_unlinked_checkpoint_is_named_against_its_first_predecessor_place() -> None:
    assert _unlinked(cp(2, ROOT, 0), cp(2, A, 0, came=ROOT), cp(2, ROOT, 0, moved_to=A),
                     cp(4, B, 2), cp(6, ROOT, 4)) == (
        4, False, _said(4, B_LABEL, "checkpoint 2", A_LABEL))
    assert _unlinked(cp(2, B, 0, anchor=False), cp(4, A, 2)) == (
        4, False, _said(4, A_LABEL, "checkpoint 2", B_LABEL))
    assert _unlinked(cp(2, A, 0), cp(4, B, 2)) == (
        2, False, _said(2, A_LABEL, "the start of the chain", ROOT_LABEL))
