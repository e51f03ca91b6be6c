"""What the server reads of a witness's answer (``control_plane/audit/witnesses.py``): at
most ``ANSWER_CAP`` bytes, within the answer's deadline (on a clock of the test's own: each
piece of a trickled answer is read at a time the test sets), and of those only the
cosignature lines of the witness's own key that verify on this checkpoint, each once, none
the note already carries. Stand-ins on local HTTP servers (``witness_world.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.audit import witnesses
from control_plane.tlog import note
from control_plane.tlog.witness import new_key, parse_key
from tests.unit.checkpoint_world import World
from tests.unit.witness_world import (
    Clock,
    Endless,
    Scripted,
    Trickle,
    add_witness,
    collect,
    new_log,
    witness_rows,
    witness_world,
)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from witness_world(tmp_path)


def _padded(line: str, total: int) -> bytes:
    """An answer of exactly ``total`` bytes: one junk line, then ``line``."""
    pad = total - len(line.encode()) - 1
    return b"#" * pad + b"\n" + line.encode()


def test_an_answer_is_read_up_to_its_cap_and_no_further(world: World) -> None:
    log = new_log()
    checkpoint = log.checkpoint(5)
    with Scripted() as whole, Scripted() as over:
        whole.body = _padded(whole.line(checkpoint), witnesses.ANSWER_CAP)
        over.body = _padded(over.line(checkpoint), witnesses.ANSWER_CAP + 1)
        assert (len(whole.body), len(over.body)) == (16384, 16385)
        add_witness(world, whole.url, whole.vkey)
        add_witness(world, over.url, over.vkey)
        collected = collect(world, log, 5, 0)
        line = whole.line(checkpoint)
    assert [(o.status, o.size, o.lines) for o in collected.outcomes] == [
        ("cosigned", 5, (line,)), ("bad_cosignature", None, ())]
    assert collected.note == checkpoint + line
    assert [(r.cosigned_size, r.last_status) for r in witness_rows(world)] == [
        (5, "cosigned"), (0, "bad_cosignature")]


def test_an_endless_answer_is_cut_at_the_cap_not_read_to_the_deadline(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(step=0.5)  # the deadline (20 s) is 40 readings away
    monkeypatch.setattr(witnesses, "time", clock)
    log = new_log()
    with Endless() as endless:
        add_witness(world, endless.url, endless.vkey)
        collected = collect(world, log, 5, 0)
    assert [o.status for o in collected.outcomes] == ["bad_cosignature"]
    assert clock.readings < 41  # read to the cap, never to the deadline


def _trickled(world: World, monkeypatch: pytest.MonkeyPatch, times: list[float]
              ) -> tuple[witnesses.Collected, str, Clock]:
    """A witness's valid answer sent in ``len(times)`` pieces, each read at its time."""
    clock = Clock()
    monkeypatch.setattr(witnesses, "time", clock)
    log = new_log()
    checkpoint = log.checkpoint(6)
    with Trickle(clock, []) as trickle:
        line = trickle.line(checkpoint).encode()
        cuts = [len(line) * i // len(times) for i in range(len(times) + 1)]
        trickle.pieces = [(at, line[cuts[i]:cuts[i + 1]]) for i, at in enumerate(times)]
        add_witness(world, trickle.url, trickle.vkey)
        collected = collect(world, log, 6, 0)
    return collected, line.decode(), clock


def test_an_answer_whose_last_piece_comes_at_its_deadline_is_read(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deadline is twice CALL_SECONDS (10 s) after the call began: a piece read at
    exactly 20 s is in time."""
    collected, line, clock = _trickled(world, monkeypatch, [5.0, 19.9, 20.0])
    assert [(o.status, o.lines) for o in collected.outcomes] == [("cosigned", (line,))]
    assert clock.readings == 4


def test_an_answer_still_coming_past_its_deadline_is_a_timeout(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    collected, _, clock = _trickled(world, monkeypatch, [5.0, 20.001, 20.002])
    assert [(o.status, o.size, o.lines) for o in collected.outcomes] == [
        ("timeout", None, ())]
    assert clock.readings == 3  # the deadline, the first piece, the late one
    assert witness_rows(world)[0].last_status == "timeout"


def test_only_the_witnesses_own_valid_lines_are_kept_once(world: World) -> None:
    log = new_log()
    checkpoint = log.checkpoint(8)
    text = note.parse(checkpoint).text
    other_checkpoint = note.Checkpoint(log.origin, 3, log.root(3)).text()
    namesake = parse_key(new_key("w.example"))  # the same name, another key
    with Scripted() as mixed, Scripted() as garbled, Scripted() as elsewhere, \
            Scripted() as unfinished:
        own, later = mixed.line(checkpoint), mixed.line(checkpoint, 1_700_000_060)
        mixed.body = (garbled.line(checkpoint) + note.cosign(text, namesake, 5).line() + own
                      + "hello\n" + own + checkpoint.split("\n\n")[1] + later[:-1]).encode()
        garbled.body = b"\xff\xfe\n" + garbled.line(checkpoint).encode()
        elsewhere.body = elsewhere.line(other_checkpoint).encode()
        unfinished.body = unfinished.line(checkpoint)[:-1].encode()
        for stand in (mixed, garbled, elsewhere, unfinished):
            add_witness(world, stand.url, stand.vkey)
        collected = collect(world, log, 8, 0)
    assert [(o.status, o.lines) for o in collected.outcomes] == [
        ("cosigned", (own,)), ("bad_cosignature", ()), ("bad_cosignature", ()),
        ("bad_cosignature", ())]
    assert collected.note == checkpoint + own


def test_a_line_the_note_already_carries_is_not_added_again(world: World) -> None:
    log = new_log()
    signed = log.checkpoint(8)
    text, log_line = signed.split("\n\n")
    with Scripted() as witness:
        first, second = witness.line(signed), witness.line(signed, 1_700_000_060)
        carried = text + "\n\n" + first + log_line  # cosigned already, its line first
        witness.body = (first + log_line + second + second).encode()
        add_witness(world, witness.url, witness.vkey)
        collected = collect(world, log, 8, 0, note_text=carried)
        assert witness.bodies[0].endswith(carried.encode())
    assert [(o.status, o.lines) for o in collected.outcomes] == [("cosigned", (second,))]
    assert collected.note == carried + second
    assert note.verify_cosignature(collected.note, note.parse_verifier(witness.vkey)) == (
        1_700_000_060)
