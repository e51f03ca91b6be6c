"""``memplane knowledge add/list/delete``: the operator commands on the embedded default's
database and bucket (and PostgreSQL), through the same service as the API, audited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from control_plane.db.models import AccessLog, MemoryPointer
from tests.cli.test_events_entries import _rows, _run, env, wide_tables

__all__ = ["env", "wide_tables"]  # the fixtures, used by name


def _json_lines(output: str) -> list[dict[str, object]]:
    """The JSON lines of the output (the database/bucket line goes to stderr, mixed in)."""
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def _flat(output: str) -> str:
    return " ".join(output.replace("│", " ").split())


def test_add_list_delete(env: dict[str, str], tmp_path: Path) -> None:
    handbook = tmp_path / "refund-policy.md"
    handbook.write_text("Refunds are granted within 30 days of delivery. " * 40)
    added = _run(env, "knowledge", "add", "support-bot", str(handbook), "-",
                 "--metadata", '{"source": "handbook"}', stdin="Open 9 to 18 on weekdays.")
    assert added.exit_code == 0, added.output
    [answer] = _json_lines(added.output)
    documents: list[dict[str, str]] = answer["documents"]  # type: ignore[assignment]
    assert [(d["title"], d["chunk_count"]) for d in documents] == [
        ("refund-policy", 3), ("stdin", 1)]
    pointers: list[Any] = _rows(env, MemoryPointer, MemoryPointer.memory_type == "knowledge")
    assert sorted(p.key for p in pointers) == sorted(
        [f"knowledge/{documents[0]['document_id']}/{i:04d}" for i in range(3)]
        + [f"knowledge/{documents[1]['document_id']}/0000"])

    listed = _run(env, "knowledge", "list", "support-bot", "--json")
    assert listed.exit_code == 0, listed.output
    rows = _json_lines(listed.output)
    assert sorted((r["title"], r["chunk_count"]) for r in rows) == [
        ("refund-policy", 3), ("stdin", 1)]
    table = _run(env, "knowledge", "list", "support-bot")
    assert documents[0]["document_id"] in table.output and "refund-policy" in table.output

    gone = _run(env, "knowledge", "delete", documents[0]["document_id"])
    assert gone.output.splitlines()[-1] == f"deleted {documents[0]['document_id']} (3 chunks)"
    again = _run(env, "knowledge", "delete", documents[0]["document_id"])
    assert again.exit_code == 1
    assert f"no knowledge document {documents[0]['document_id']}" in again.output
    logged: list[Any] = _rows(env, AccessLog, AccessLog.operation.like("knowledge_%"))
    operations = [r.operation for r in logged]
    assert sorted(operations) == ["knowledge_add", "knowledge_delete", "knowledge_delete",
                                  "knowledge_list", "knowledge_list"]


def test_bad_input_is_a_usage_error(env: dict[str, str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    refused = _run(env, "knowledge", "add", "bot", str(empty))
    assert refused.exit_code == 2
    assert "content is empty; send the document's text" in _flat(refused.output)
    two = _run(env, "knowledge", "add", "bot", str(empty), str(empty), "--title", "x")
    assert two.exit_code == 2 and "--title names one document" in _flat(two.output)
    missing = _run(env, "knowledge", "add", "bot", str(tmp_path / "nope.txt"))
    assert missing.exit_code == 2 and "cannot read" in _flat(missing.output)
    assert _rows(env, MemoryPointer) == []
