"""The SDK's knowledge methods (``client.memory.add_knowledge`` / ``list_knowledge`` /
``iter_knowledge`` / ``delete_knowledge``) and ``client.embedder``, sync and async, against
a live server on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import memplane
from tests.support.service import Tenant

DOCS: list[dict[str, Any]] = [{"title": "Refund policy", "content": "Refunds within 30 days. " * 60,
         "metadata": {"v": 1}},
        {"title": "Hours", "content": "Open 9 to 18, Monday to Friday."}]


def test_sync_add_list_iterate_delete(tenant: Tenant) -> None:
    with tenant.client() as client:
        added = client.memory.add_knowledge("support-bot", DOCS, idempotency_key="k-1")
        again = client.memory.add_knowledge("support-bot", DOCS, idempotency_key="k-1")
        assert again == added
        assert [(d.title, d.chunk_count, d.characters) for d in added.documents] == [
            ("Refund policy", 2, 1440), ("Hours", 1, 31)]
        page = client.memory.list_knowledge("support-bot", limit=1)
        assert len(page.items) == 1 and page.next_cursor is not None
        listed = list(client.memory.iter_knowledge("support-bot", limit=1))
        assert sorted(d.document_id for d in listed) == sorted(
            d.document_id for d in added.documents)
        gone = client.memory.delete_knowledge(added.documents[0].document_id)
        assert (gone.document_id, gone.deleted_chunks) == (added.documents[0].document_id, 2)
        with pytest.raises(memplane.NotFound):
            client.memory.delete_knowledge(added.documents[0].document_id)
        with pytest.raises(memplane.BadRequest) as refused:
            client.memory.add_knowledge("support-bot", [{"title": "t", "content": " "}])
        assert "content is empty; send the document's text" in str(refused.value)
        assert [d.title for d in client.memory.list_knowledge("support-bot").items] == [
            "Hours"]
        config = client.embedder.get_config()
        assert (config.provider, config.model, config.dim) == ("hash", "memplane-hash-v2",
                                                               512)
        assert client.embedder.delete_config() == config


def test_async_add_list_delete(tenant: Tenant) -> None:
    async def run() -> None:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            added = await client.memory.add_knowledge("bot", DOCS[1:])
            [document] = added.documents
            listed = [d async for d in client.memory.iter_knowledge("bot")]
            assert [(d.document_id, d.chunk_count) for d in listed] == [
                (document.document_id, 1)]
            gone = await client.memory.delete_knowledge(document.document_id)
            assert gone.deleted_chunks == 1
            assert (await client.memory.list_knowledge("bot")).items == []
            assert (await client.embedder.get_config()).provider == "hash"

    asyncio.run(run())
