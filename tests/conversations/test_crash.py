"""Crash safety of conversations, on the services against SQLite and PostgreSQL: a process
dying between the steps of adding a message or of summarising never loses an acknowledged
message and never counts one twice; the rerun finishes the summary without repeating it."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from control_plane.conversations import service, summarize, tokens
from control_plane.conversations.schemas import MessageIn
from control_plane.db.models import Conversation, MemoryPointer
from tests.support.service import ServiceWorld, SimulatedCrash

LINES = [f"We agreed on step {i} of the Acme plan." for i in range(1, 9)]


def _add(world: ServiceWorld, conv: str, text: str) -> object:
    with world.runtime.sessions() as session:
        return service.add_message(session, world.runtime.plane, world.runtime.settings,
                                   world.actor, conv, MessageIn(role="user", content=text,
                                                                user_id="u-crash",
                                                                context_window_limit=256))


def _row(world: ServiceWorld, conv: str) -> Conversation:
    with world.runtime.sessions() as session:
        row = session.scalar(select(Conversation).where(
            Conversation.tenant_id == world.tenant_id, Conversation.conversation_id == conv))
        assert row is not None
        session.expunge(row)
        return row


def _summarize(world: ServiceWorld, conv: str) -> dict[str, object]:
    row = _row(world, conv)
    with world.runtime.sessions() as session:
        return summarize.summarize(session, world.runtime.plane, world.runtime.settings,
                                   world.actor, world.tenant_id, row.id)


def test_a_crash_after_the_message_write_leaves_it_uncounted(world: ServiceWorld) -> None:
    conv = "c-crash-write"
    world.crash_at = "write:after_commit"
    with pytest.raises(SimulatedCrash):
        _add(world, conv, LINES[0])
    _add(world, conv, LINES[1])
    row = _row(world, conv)
    cost = tokens.for_model("gpt-4o").message(LINES[1])
    assert (row.last_seq, row.message_count, row.context_window_tokens) == (2, 1, cost)
    with world.runtime.sessions() as session:
        listed, _ = service.list_messages(session, world.runtime.plane, world.actor, conv)
    assert [(m.seq, m.content) for m in listed] == [(2, LINES[1])]


def test_a_crash_between_the_summary_and_the_row_is_finished_by_the_rerun(
        world: ServiceWorld) -> None:
    conv = "c-crash-summary"
    for line in LINES:
        _add(world, conv, line)
    costs = tokens.for_model("gpt-4o").message(LINES[0])
    world.crash_at = "conversation_summary:after_write"
    with pytest.raises(SimulatedCrash):
        _summarize(world, conv)
    stale = _row(world, conv)
    assert (stale.summarized_through, stale.summary_pointer_id) == (0, None)
    assert stale.context_window_tokens == 8 * costs
    rerun = _summarize(world, conv)
    row = _row(world, conv)
    kept = 64 // costs
    assert rerun["messages"] == 0  # the crashed run's summary already holds them
    assert (row.summarized_through, row.context_window_tokens) == (8 - kept, kept * costs)
    assert row.summary_pointer_id is not None
    with world.runtime.sessions() as session:
        pointer = session.get(MemoryPointer, row.summary_pointer_id)
        assert pointer is not None
        from control_plane.memories import service as memories

        value = memories.read_pointer(session, world.runtime.plane, world.actor, pointer).value
    assert value["through"] == 8 - kept
    assert [value["text"].count(line.rstrip(".")) for line in LINES[:8 - kept]] == [1] * (
        8 - kept)
    assert all(line.rstrip(".") not in value["text"] for line in LINES[8 - kept:])
    again = _summarize(world, conv)
    assert again["messages"] == 0
    assert _row(world, conv).context_window_tokens == kept * costs
