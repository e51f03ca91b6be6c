"""Collecting the witnesses' cosignatures (``control_plane/audit/witnesses.py``): which
request each witness gets (the ``old`` size and proof from what the server knows of it), what
each answer becomes (a generic code, the size it holds, its valid lines), what the rows keep,
what is logged, and the cosigned note stored in the tenant's bucket. Real witnesses
(``control_plane.tlog.witness``) and stand-ins on local HTTP servers, an embedded database and
a local bucket (``witness_world.py``), no memplane server."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.audit import witnesses
from control_plane.db.base import utcnow
from control_plane.tlog import merkle, note
from control_plane.tlog.witness import SIZE_TYPE, request_body
from storage_adapters import base as storage
from tests.unit.checkpoint_world import World, down
from tests.unit.witness_world import (
    RealWitness,
    Scripted,
    a_vkey,
    add_witness,
    closed_port,
    collect,
    new_log,
    witness_rows,
    witness_world,
)
from tests.witness.logs import reader

LOGGER = "control_plane.audit.witnesses"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from witness_world(tmp_path)


def test_a_tenant_without_witnesses_gets_its_note_back_and_nothing_is_asked(
        world: World) -> None:
    log = new_log()
    other = world.new_tenant()
    with Scripted(200) as stranger:
        add_witness(world, stranger.url, stranger.vkey, tenant=other)
        collected = collect(world, log, 4, 0)
    assert collected == witnesses.Collected(log.checkpoint(4), ())
    assert stranger.requests == []


def test_each_witness_is_sent_the_proof_from_the_size_it_holds(world: World,
                                                               tmp_path: Path) -> None:
    log = new_log()
    proved: list[tuple[int, int]] = []

    def prove(first: int, second: int) -> list[bytes]:
        proved.append((first, second))
        return merkle.consistency_proof(first, second, reader(log.leaves))

    checkpoint = log.checkpoint(9)
    with RealWitness(tmp_path / "a", log).holds(5) as same, \
            RealWitness(tmp_path / "b", log) as fresh, \
            RealWitness(tmp_path / "c", log).holds(3) as behind, \
            RealWitness(tmp_path / "d", log).holds(9) as level, \
            RealWitness(tmp_path / "e", log).holds(11) as ahead:
        ids = [add_witness(world, same.url + "/w", same.vkey, cosigned_size=5),
               add_witness(world, fresh.url, fresh.vkey),
               add_witness(world, behind.url, behind.vkey, cosigned_size=3),
               add_witness(world, level.url, level.vkey, cosigned_size=9),
               add_witness(world, ahead.url, ahead.vkey, cosigned_size=11)]
        before = utcnow()
        collected = collect(world, log, 9, 5, prove=prove)
        after = utcnow()
        assert proved == [(3, 9)]  # never (9, 9), never from 11, never from the 5 given
        assert same.requests == [("/w/add-checkpoint", "text/plain", log.request(5, 9))]
        assert fresh.bodies == [request_body(0, (), checkpoint)]
        assert behind.bodies == [request_body(3, log.proof(3, 9), checkpoint)]
        assert level.bodies == [log.request(5, 9)]
        assert ahead.bodies == [log.request(5, 9)]
        lines = tuple(w.line(checkpoint) for w in (same, fresh, behind))
    host = "127.0.0.1"
    assert collected.outcomes == (
        witnesses.Outcome(ids[0], host, "cosigned", 9, (lines[0],)),
        witnesses.Outcome(ids[1], host, "cosigned", 9, (lines[1],)),
        witnesses.Outcome(ids[2], host, "cosigned", 9, (lines[2],)),
        witnesses.Outcome(ids[3], host, "conflict", 9),
        witnesses.Outcome(ids[4], host, "conflict", 11))
    assert collected.note == checkpoint + "".join(lines)
    rows = witness_rows(world)
    assert [(r.cosigned_size, r.last_status) for r in rows] == [
        (9, "cosigned"), (9, "cosigned"), (9, "cosigned"), (9, "conflict"), (11, "conflict")]
    assert all(before <= r.last_attempt_at <= after for r in rows if r.last_attempt_at)
    assert len({r.last_attempt_at for r in rows}) == 1


def test_without_a_prover_or_when_it_cannot_prove_the_given_request_is_sent(
        world: World, tmp_path: Path) -> None:
    log = new_log()

    def cannot(first: int, second: int) -> list[bytes]:
        raise merkle.ProofError(f"no proof from {first}")

    with RealWitness(tmp_path / "a", log).holds(3) as behind:
        add_witness(world, behind.url, behind.vkey, cosigned_size=3)
        unproved = collect(world, log, 9, 5)
        refused = collect(world, log, 9, 5, prove=cannot)
        assert behind.bodies == [log.request(5, 9)] * 2
    assert [(o.status, o.size) for o in unproved.outcomes + refused.outcomes] == [
        ("conflict", 3), ("conflict", 3)]


def test_the_note_given_is_sent_whole_and_a_witness_at_the_given_size_gets_its_proof(
        world: World, tmp_path: Path) -> None:
    log = new_log()
    proved: list[tuple[int, int]] = []

    def prove(first: int, second: int) -> list[bytes]:
        proved.append((first, second))
        return []  # a wrong proof: never sent to a witness at the size the caller gave

    with RealWitness(tmp_path / "a", log).holds(4) as same:
        add_witness(world, same.url, same.vkey, cosigned_size=4)
        collected = collect(world, log, 7, 4, prove=prove)
        assert same.bodies == [log.request(4, 7)]
    assert proved == []
    assert [o.status for o in collected.outcomes] == ["cosigned"]
    assert witness_rows(world)[0].cosigned_size == 7


def test_each_refusal_becomes_its_generic_code_and_keeps_the_size_the_row_had(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    log = new_log()
    caplog.set_level(logging.INFO, logger=LOGGER)
    statuses = [400, 403, 404, 422, 500, 499, 302, 418]
    stands = [Scripted(s, b"1\n", {"Content-Type": SIZE_TYPE, "Location": "http://x/"})
              for s in statuses]
    for stand in stands:
        stand.__enter__()
    try:
        for stand in stands:
            add_witness(world, stand.url, stand.vkey, cosigned_size=2, last_status="cosigned")
        collected = collect(world, log, 6, 2)
    finally:
        for stand in stands:
            stand.__exit__(None, None, None)
    codes = ["request_refused", "log_key_refused", "origin_unknown", "proof_refused",
             "witness_error", "refused", "refused", "refused"]
    assert [(o.status, o.size, o.lines) for o in collected.outcomes] == [
        (code, None, ()) for code in codes]
    assert collected.note == log.checkpoint(6)
    assert [(r.cosigned_size, r.last_status) for r in witness_rows(world)] == [
        (2, code) for code in codes]
    assert sorted(r.getMessage() for r in caplog.records if r.name == LOGGER) == sorted(
        f"audit witness at 127.0.0.1: {code}" for code in codes)
    assert all(len(stand.requests) == 1 for stand in stands)


def test_a_cosigning_witness_is_not_logged_a_closed_port_or_a_silent_one_is(
        world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = new_log()
    caplog.set_level(logging.INFO, logger=LOGGER)
    with RealWitness(tmp_path / "a", log) as real, Scripted(0) as hanging_up:
        add_witness(world, real.url, real.vkey)
        add_witness(world, f"http://127.0.0.1:{closed_port()}", a_vkey())
        add_witness(world, hanging_up.url, hanging_up.vkey)
        add_witness(world, "http://w\x00.example", a_vkey())  # a URL the client refuses
        collected = collect(world, log, 3, 0)
        assert len(hanging_up.requests) == 1
    assert [(o.host, o.status, o.size) for o in collected.outcomes] == [
        ("127.0.0.1", "cosigned", 3), ("127.0.0.1", "unreachable", None),
        ("127.0.0.1", "unreachable", None), ("w\x00.example", "unreachable", None)]
    assert sorted(r.getMessage() for r in caplog.records if r.name == LOGGER) == [
        "audit witness at 127.0.0.1: unreachable"] * 2 + [
        "audit witness at w\x00.example: unreachable"]
    caplog.clear()
    monkeypatch.setattr(witnesses, "CALL_SECONDS", 0.3)  # the wait for an answer
    other = world.new_tenant()
    with Scripted(hold=True) as silent:
        add_witness(world, silent.url, silent.vkey, tenant=other)
        held = collect(world, log, 3, 0, tenant=other)
        assert len(silent.requests) == 1
    assert [(o.status, o.size, o.lines) for o in held.outcomes] == [("timeout", None, ())]
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        "audit witness at 127.0.0.1: timeout"]
    assert witness_rows(world, other)[0].last_status == "timeout"


def test_a_witness_the_guard_refuses_is_never_reached(tmp_path: Path) -> None:
    log = new_log()
    for world in witness_world(tmp_path / "strict", allowed_endpoints=[]):
        with RealWitness(tmp_path / "a", log) as real:
            add_witness(world, real.url, real.vkey)
            collected = collect(world, log, 3, 0)
            assert real.requests == []
        assert [(o.host, o.status) for o in collected.outcomes] == [
            ("127.0.0.1", "endpoint_not_allowed")]
        assert collected.note == log.checkpoint(3)
        assert witness_rows(world)[0].last_status == "endpoint_not_allowed"


CONFLICTS = [  # a 409's body and content type, and the size kept from it
    (b"9\n", SIZE_TYPE, 9),
    (b" 12 \n", SIZE_TYPE + "; charset=utf-8", 12),
    (b"9\n", "text/plain", None),
    (b"x9\n", SIZE_TYPE, None),
    (b"", SIZE_TYPE, None),
    (b"9223372036854775807\n", SIZE_TYPE, (1 << 63) - 1),
    (b"9223372036854775808\n", SIZE_TYPE, None),
    (b"99999999999999999999\n", SIZE_TYPE, None),
    (b"1" * 5000 + b"\n", SIZE_TYPE, None),
]


def test_a_409_names_the_size_the_witness_holds_only_in_the_protocols_form(
        world: World, tmp_path: Path) -> None:
    """A size is kept only when it is a decimal a row can hold; a witness answering another
    size (one past 2^63 - 1, a huge one) is a conflict of unknown size, and the other
    witnesses' outcomes and cosignatures are kept all the same."""
    log = new_log()
    stands = [Scripted(409, body, {"Content-Type": kind}) for body, kind, _ in CONFLICTS]
    for stand in stands:
        stand.__enter__()
    try:
        with RealWitness(tmp_path / "a", log) as real:
            for stand in stands:
                add_witness(world, stand.url, stand.vkey, cosigned_size=3)
            add_witness(world, real.url, real.vkey)
            collected = collect(world, log, 5, 0)
            line = real.line(log.checkpoint(5))
    finally:
        for stand in stands:
            stand.__exit__(None, None, None)
    sizes = [size for _, _, size in CONFLICTS]
    assert [(o.status, o.size) for o in collected.outcomes] == [
        *(("conflict", size) for size in sizes), ("cosigned", 5)]
    assert collected.note == log.checkpoint(5) + line
    assert [(r.cosigned_size, r.last_status) for r in witness_rows(world)] == [
        *((3 if size is None else size, "conflict") for size in sizes), (5, "cosigned")]


def test_outcomes_and_collections_cannot_be_changed() -> None:
    outcome = witnesses.Outcome(uuid.uuid4(), "h", "cosigned")
    assert (outcome.size, outcome.lines) == (None, ())
    collected = witnesses.Collected("n", (outcome,))
    asked = witnesses._Asked(outcome.witness_id, "u", note.parse_verifier(a_vkey()), b"")
    for frozen, name in ((outcome, "status"), (collected, "note"), (asked, "url")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, name, "x")


def test_the_documented_limits() -> None:
    assert (witnesses.MAX_WITNESSES, witnesses.CALL_SECONDS, witnesses.ANSWER_CAP) == (
        8, 10.0, 16384)
    assert witnesses.COSIGNED_FOLDER == ("audit", "checkpoints", "tlog", "cosigned")


def test_the_cosigned_note_is_stored_once_under_its_size(world: World, tmp_path: Path) -> None:
    log = new_log()
    folder = world.bucket / f"tenants/{world.tenant}/audit/checkpoints/tlog/cosigned"
    with RealWitness(tmp_path / "a", log) as real:
        add_witness(world, real.url, real.vkey)
        with world.sessions() as session:
            target = world.plane.active(session, world.tenant)
            session.rollback()
            assert witnesses.cosigned_path(target, 7) == (
                f"tenants/{world.tenant}/audit/checkpoints/tlog/cosigned/"
                "00000000000000000007")
            collected = witnesses.cosign_and_store(session, world.settings, target,
                                                   world.tenant, log.checkpoint(7), 0, [])
            assert collected.note == log.checkpoint(7) + real.line(log.checkpoint(7))
            assert sorted(p.name for p in folder.iterdir()) == ["00000000000000000007"]
            assert (folder / "00000000000000000007").read_text() == collected.note
            assert witnesses.store_cosigned(target, 7, "another\n") is False
            assert (folder / "00000000000000000007").read_text() == collected.note
            assert witnesses.store_cosigned(target, 12, "twelve\n") is True
            assert (folder / "00000000000000000012").read_text() == "twelve\n"
            plain = witnesses.collect_cosignatures(session, world.settings, world.tenant,
                                                   log.checkpoint(9), 7, log.proof(7, 9))
            assert plain == log.checkpoint(9) + real.line(log.checkpoint(9))
    assert sorted(p.name for p in folder.iterdir()) == [
        "00000000000000000007", "00000000000000000012"]  # collecting alone stores nothing


def test_nothing_is_stored_without_a_cosignature_and_a_failed_write_raises(
        world: World, tmp_path: Path) -> None:
    log = new_log()
    folder = world.bucket / f"tenants/{world.tenant}/audit/checkpoints/tlog/cosigned"
    with Scripted(422) as refusing, world.sessions() as session:
        add_witness(world, refusing.url, refusing.vkey)
        target = world.plane.active(session, world.tenant)
        session.rollback()
        collected = witnesses.cosign_and_store(session, world.settings, target, world.tenant,
                                               log.checkpoint(4), 0, [])
        assert [o.status for o in collected.outcomes] == ["proof_refused"]
        assert not folder.exists()
    with RealWitness(tmp_path / "a", log) as real, world.sessions() as session:
        add_witness(world, real.url, real.vkey)
        target = world.plane.active(session, world.tenant)
        session.rollback()
        world.plane.faults["put:tlog/cosigned"] = down
        with pytest.raises(storage.StorageUnavailable):
            witnesses.cosign_and_store(session, world.settings, target, world.tenant,
                                       log.checkpoint(4), 0, [])
    assert [r.last_status for r in witness_rows(world)] == ["unreachable", "cosigned"]
    assert not folder.exists()
