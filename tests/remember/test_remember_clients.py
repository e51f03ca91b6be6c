"""``client.memory.remember`` (sync and async) against a live server on SQLite and
PostgreSQL, and ``memplane remember`` on the embedded default's data dir and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

import memplane
from control_plane.db.models import AccessLog, MemoryPointer
from tests.cli.test_events_entries import _rows, _run, env, wide_tables
from tests.support.service import Tenant

__all__ = ["env", "wide_tables"]  # the fixtures, used by name


def test_sync_and_async_remember(tenant: Tenant) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    with tenant.client() as client:
        first = client.memory.remember(
            messages=[{"role": "user", "content": "I prefer responses in bullet points."}],
            user_id=user, agent_id="support-bot", conversation_id="c-1")
        dry = client.memory.remember(
            messages=[{"role": "user", "content": "Actually I prefer numbered lists."}],
            user_id=user, dry_run=True)
        kept = client.memory.get(scope="user", scope_ref=user,
                                 key="preference.response_format")
        with pytest.raises(memplane.BadRequest):
            client.memory.remember(messages=[], user_id=user)

    async def later() -> memplane.Remembered:
        async with memplane.AsyncClient(tenant.stack.base_url, tenant.admin_key) as client:
            return await client.memory.remember(
                messages=[{"role": "user", "content": "Actually I prefer numbered lists."},
                          {"role": "user", "content": "my card is 4111 1111 1111 1111"}],
                user_id=user)

    second = asyncio.run(later())
    assert isinstance(first.decisions[0], memplane.RememberDecision)
    assert [(d.event, d.key, d.value, d.previous) for d in first.decisions] == [
        ("ADD", "preference.response_format", "bullet points", None)]
    assert (first.extractor, first.model, first.dry_run) == ("builtin-v1", None, False)
    assert [(d.event, d.value, d.previous) for d in dry.decisions] == [
        ("UPDATE", "numbered lists", "bullet points")]
    assert dry.dry_run is True
    assert kept.value["value"] == "bullet points"
    assert [(d.event, d.key, d.value, d.previous, d.reason) for d in second.decisions] == [
        ("UPDATE", "preference.response_format", "numbered lists", "bullet points",
         "changed"),
        ("NONE", "about.card", None, None, "sensitive:card")]


def test_cli_remember(env: dict[str, str], tmp_path: Path) -> None:
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps([
        {"role": "user", "content": "I use Slack. I'm working on the Apollo migration."},
        {"role": "assistant", "content": "I use Teams myself."}]))
    added = _run(env, "remember", "u-7", "--file", str(messages), "--conversation", "c-3",
                 "--json")
    assert added.exit_code == 0, added.output
    answer = json.loads(added.stdout.splitlines()[-1])
    assert [(d["event"], d["key"], d["value"]) for d in answer["decisions"]] == [
        ("ADD", "uses.slack", "Slack"), ("ADD", "project.apollo-migration", "Apollo migration")]
    retracted = _run(env, "remember", "u-7", "-m", "user: I don't use Slack anymore",
                     "-m", "assistant: I use Slack")
    assert retracted.exit_code == 0, retracted.output
    flat = " ".join(retracted.output.replace("│", " ").split())
    assert "DELETE uses.slack Slack retracted" in flat
    bad = _run(env, "remember", "u-7", "-m", "boss: hello")
    assert bad.exit_code == 2
    assert "write each message as 'ROLE: text'" in " ".join(bad.output.split())
    pointers = _rows(env, MemoryPointer, MemoryPointer.scope_ref == "u-7")
    assert sorted((p.key, p.source) for p in pointers) == [  # type: ignore[attr-defined]
        ("project.apollo-migration", "remember")]
    rows = _rows(env, AccessLog, AccessLog.operation == "remember")
    assert sorted(r.detail for r in rows) == [  # type: ignore[attr-defined]
        "user: builtin-v1 add=0 update=0 delete=1 none=0",
        "user: builtin-v1 add=2 update=0 delete=0 none=0"]
