"""``audit/transparency.py`` called directly: the signed checkpoint of the tree (rows committed
before the call sealed into it first), the verifier key, the inclusion and consistency proofs,
each read's own audit row, an impossible ask (422 with the tree's sentence) and damaged tiles
(409). Embedded SQLite, no server (``checkpoint_world.py``); every answer is held to roots and
proofs computed here from the rows' leaves."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from control_plane.audit import service as audit
from control_plane.audit import transparency
from control_plane.audit.leaves import leaf_bytes
from control_plane.audit.notes import signer
from control_plane.db.engine import begin_write
from control_plane.db.models import AccessLog, AuditTile
from control_plane.errors import InvalidInput
from control_plane.identity import Actor
from control_plane.tlog import merkle, note
from tests.unit.checkpoint_world import World, make_world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path)


def actor(world: World) -> Actor:
    return Actor(world.tenant, "api", "key-1")


def rows(world: World) -> list[tuple[int | None, str, bool, str]]:
    """The tenant's rows other than the ``write`` rows the test made, oldest first."""
    with world.sessions() as session:
        return [tuple(r) for r in session.execute(  # type: ignore[misc]
            select(AccessLog.seq, AccessLog.operation, AccessLog.success, AccessLog.detail)
            .where(AccessLog.tenant_id == world.tenant, AccessLog.operation != "write")
            .order_by(AccessLog.accessed_at, AccessLog.id)).all()]


def leaf_hashes(world: World) -> list[bytes]:
    with world.sessions() as session:
        found = session.scalars(select(AccessLog).where(
            AccessLog.tenant_id == world.tenant, AccessLog.seq.is_not(None))
            .order_by(AccessLog.seq)).all()
        return [hashlib.sha256(b"\x00" + leaf_bytes(r)).digest() for r in found]


def mth(hashes: list[bytes]) -> bytes:
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(hashes[:k]) + mth(hashes[k:])).digest()


def unsealed(world: World, n: int) -> None:
    with world.sessions() as session:
        begin_write(session)
        for i in range(n):
            audit.record(session, actor(world), "write", detail=f"row {i}")
        session.commit()


def test_the_checkpoint_seals_the_rows_before_it_and_is_audited(world: World) -> None:
    unsealed(world, 5)
    with world.sessions() as session:
        text = transparency.checkpoint_as(session, world.plane, world.settings, actor(world))
    checkpoint = note.parse_checkpoint(note.verify(text, signer(world.settings).verifier))
    assert (checkpoint.origin, checkpoint.size, checkpoint.root) == (
        f"memplane/audit/{world.tenant}", 5, mth(leaf_hashes(world)[:5]))
    assert rows(world) == [(None, "audit_checkpoint", True, "tree size 5")]


def test_the_verifier_key_is_the_signers_and_its_read_names_the_key_id(world: World) -> None:
    with world.sessions() as session:
        key = transparency.verifier_key_as(session, world.plane, world.settings, actor(world))
    verifier = signer(world.settings).verifier
    assert key == verifier.text()
    assert rows(world) == [(None, "audit_verifier_key", True, verifier.id.hex())]


def test_an_inclusion_proof_proves_the_row_and_is_audited(world: World) -> None:
    world.append(8)
    with world.sessions() as session:
        proof = transparency.inclusion_as(session, world.plane, actor(world), 3, 8)
    hashes = leaf_hashes(world)
    decoded = [base64.b64decode(h) for h in proof["hashes"]]
    assert (proof["leaf_index"], proof["tree_size"]) == (2, 8)
    assert decoded == [hashes[3], mth(hashes[0:2]), mth(hashes[4:8])]
    assert merkle.verify_inclusion(hashes[2], 2, 8, decoded, mth(hashes))
    assert rows(world) == [(None, "audit_inclusion_proof", True, "seq 3 in tree size 8")]


def test_a_consistency_proof_extends_the_smaller_tree_and_is_audited(world: World) -> None:
    world.append(8)
    with world.sessions() as session:
        proof = transparency.consistency_as(session, world.plane, actor(world), 3, 8)
    hashes = leaf_hashes(world)
    decoded = [base64.b64decode(h) for h in proof["hashes"]]
    assert (proof["first"], proof["second"]) == (3, 8)
    assert merkle.verify_consistency(3, 8, mth(hashes[:3]), mth(hashes), decoded)
    assert rows(world) == [(None, "audit_consistency_proof", True,
                                "tree size 3 to 8")]


def test_an_impossible_ask_is_the_callers_mistake_with_the_trees_sentence(
        world: World) -> None:
    world.append(8)
    with world.sessions() as session:
        with pytest.raises(InvalidInput) as asked:
            transparency.inclusion_as(session, world.plane, actor(world), 9, 8)
        assert asked.value.detail == "row 9 is not in the tree of the first 8 rows"
        assert isinstance(asked.value.__cause__, merkle.ProofError)
        with pytest.raises(InvalidInput) as asked:
            transparency.consistency_as(session, world.plane, actor(world), 3, 9)
        assert asked.value.detail == "second 9 is beyond the log's 8 sealed rows"
    assert rows(world) == [
        (None, "audit_inclusion_proof", False,
         "seq 9 in tree size 8 validation_error: row 9 is not in the tree of the first 8 rows"),
        (None, "audit_consistency_proof", False,
         "tree size 3 to 9 validation_error: second 9 is beyond the log's 8 sealed rows")]


def test_damaged_tiles_are_a_conflict_naming_the_missing_node(world: World) -> None:
    world.append(40)
    with world.sessions() as session:
        begin_write(session)
        session.execute(update(AuditTile).where(
            AuditTile.tenant_id == world.tenant, AuditTile.level == 0, AuditTile.idx == 0)
            .values(hashes=bytes(32 * 39)))  # one hash short: leaf 39 is gone
        session.commit()
        with pytest.raises(transparency.TreeDamaged) as damaged:
            transparency.inclusion_as(session, world.plane, actor(world), 39, 40)
    assert (damaged.value.status_code, damaged.value.code, str(damaged.value)) == (
        409, "audit_tree_damaged", "the audit log's stored tree is damaged (the tree's tiles "
        "lack node (0, 39)); it was altered in the database")
    assert rows(world) == [
        (None, "audit_inclusion_proof", False, "seq 39 in tree size 40 audit_tree_damaged: "
         "the audit log's stored tree is damaged (the tree's tiles lack node (0, 39)); it was "
         "altered in the database")]
