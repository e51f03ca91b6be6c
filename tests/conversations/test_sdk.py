"""``client.conversations`` against a live server, on SQLite and PostgreSQL, with the sync and
the async client: add, state, messages, context, summarize, delete, and the SDK's errors."""

from __future__ import annotations

import uuid

import pytest

import memplane
from tests.support.service import Tenant


def test_the_sync_client_round_trip(tenant: Tenant) -> None:
    conv = f"c/{uuid.uuid4().hex[:6]}"  # a slash travels as one encoded segment
    with tenant.client() as client:
        first = client.conversations.add_message(conv, "user", "hello world", user_id="u-sdk",
                                                 idempotency_key="m-1")
        again = client.conversations.add_message(conv, "user", "hello world",
                                                 user_id="u-sdk", idempotency_key="m-1")
        client.conversations.add_message(conv, "assistant", "Hi! How can I help?")
        state = client.conversations.get(conv)
        page = client.conversations.messages(conv, after=1)
        window = client.conversations.context(conv, system_prompt="Be brief.",
                                              message="What did I say?", token_budget=500)
        job = client.jobs.wait(client.conversations.summarize(conv).id)
        client.conversations.delete(conv)
        with pytest.raises(memplane.NotFound):
            client.conversations.get(conv)
        with pytest.raises(memplane.BadRequest):
            client.conversations.context("nope", system_prompt="x", message="y",
                                         token_budget=0)
    assert isinstance(first, memplane.MessageAdded)
    assert (first.seq, first.tokens, first.user_id) == (1, 6, "u-sdk")
    assert again == first
    assert isinstance(state, memplane.Conversation)
    assert (state.id, state.message_count, state.encoding) == (conv, 2, "o200k_base")
    assert [(m.seq, m.role, m.content) for m in page.items] == [
        (2, "assistant", "Hi! How can I help?")]
    assert isinstance(window, memplane.ContextWindow)
    assert window.messages() == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello world"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "What did I say?"}]
    assert window.total_tokens == sum(s.tokens for s in window.sections)
    assert job.state == "completed"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_async_client_round_trip(tenant: Tenant, anyio_backend: str) -> None:
    conv = f"c-{uuid.uuid4().hex[:6]}"
    async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
        added = await client.conversations.add_message(conv, "user", "hello world",
                                                       model="gpt-4", context_window_limit=512)
        state = await client.conversations.get(conv)
        listed = await client.conversations.messages(conv)
        window = await client.conversations.context(
            conv, system_prompt="Be brief.", message="again", token_budget=100,
            memory_scopes=[("user", "u-none")], memory_limit=3)
        job = await client.conversations.summarize(conv)
        await client.conversations.delete(conv)
    assert (added.seq, added.tokens) == (1, 6)
    assert (state.model, state.encoding, state.context_window_limit) == ("gpt-4",
                                                                         "cl100k_base", 512)
    assert [m.content for m in listed.items] == ["hello world"]
    assert window.encoding == "cl100k_base"
    assert job.kind == "summarize_conversation"
