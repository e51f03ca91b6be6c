"""``memplane events`` and ``memplane entries``: the operator commands, run against the
embedded default's database and bucket, through the same services as the API."""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path

import pytest
from click.testing import Result
from sqlalchemy import select
from typer.testing import CliRunner

from control_plane.db.models import AccessLog, MemoryEvent
from control_plane.runtime import Runtime
from control_plane.settings import Settings
from control_plane.tenants.service import ensure_bootstrap
from memplane.cli import app, local

ADMIN = "mp_cli_admin_key_0002_for_the_layer_tests"
CALL = "## Call with Acme\n- Agreed to raise the ROAS target to 4.\n"


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local.out, "_width", 200)


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The embedded default's data dir, or a fresh PostgreSQL database with a local bucket;
    migrated, with its default tenant."""
    env = {"MEMPLANE_DATA_DIR": str(tmp_path / "data"), "MEMPLANE_ADMIN_KEY": ADMIN}
    if request.param == "postgres":
        env.update(MEMPLANE_DATABASE_URL=request.getfixturevalue("postgres").create_database(),
                   MEMPLANE_SERVER_KEY=secrets.token_hex(24),
                   MEMPLANE_DEFAULT_BUCKET_URL=f"file://{tmp_path / 'bucket'}",
                   MEMPLANE_RECEIPT_SIGNING_KEY=base64.b64encode(
                       secrets.token_bytes(32)).decode())
    runtime = Runtime(_settings(env))
    try:
        runtime.migrate()
        with runtime.sessions() as session:
            ensure_bootstrap(session, ADMIN)
    finally:
        runtime.close()
    return env


def _settings(env: dict[str, str]) -> Settings:
    names = {"MEMPLANE_DATA_DIR": "data_dir", "MEMPLANE_ADMIN_KEY": "admin_key",
             "MEMPLANE_DATABASE_URL": "database_url", "MEMPLANE_SERVER_KEY": "server_key",
             "MEMPLANE_DEFAULT_BUCKET_URL": "default_bucket_url",
             "MEMPLANE_RECEIPT_SIGNING_KEY": "receipt_signing_key"}
    return Settings(**{names[k]: v for k, v in env.items()})


def _run(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env, input=stdin)


def _rows(env: dict[str, str], model: type, *where: object) -> list[object]:
    runtime = Runtime(_settings(env))
    try:
        with runtime.sessions() as session:
            return list(session.scalars(select(model).where(*where)))
    finally:
        runtime.close()


def test_events_append_get_and_list(env: dict[str, str]) -> None:
    appended = _run(env, "events", "append", "entity", "ent_acme", "call_summary", "-",
                    "--source", "call", "--source-ref", "call-7",
                    "--occurred-at", "2026-03-02T14:05:00Z", stdin=CALL)
    assert appended.exit_code == 0, appended.output
    event = json.loads(appended.stdout)
    assert (event["scope"], event["scope_ref"], event["kind"], event["source"],
            event["source_ref"], event["occurred_at"]) == (
        "entity", "ent_acme", "call_summary", "call", "call-7", "2026-03-02T14:05:00Z")
    second = _run(env, "events", "append", "entity", "ent_acme", "decision", "ROAS 4")
    assert second.exit_code == 0, second.output

    body = _run(env, "events", "get", event["id"])
    as_json = _run(env, "events", "get", event["id"], "--json")
    listed = _run(env, "events", "list", "--scope", "entity", "--ref", "ent_acme",
                  "--kind", "call_summary", "--json")
    table = _run(env, "events", "list")

    assert (body.exit_code, body.stdout) == (0, CALL + "\n")
    assert json.loads(as_json.stdout) == {**event, "body": CALL}
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [event]
    assert table.exit_code == 0
    assert "events (2)" in table.stdout
    assert "call_summary" in table.stdout and "decision" in table.stdout
    assert event["id"] in table.stdout
    accessors = {row.accessor_id for row in _rows(env, AccessLog)}  # type: ignore[attr-defined]
    assert {"cli:events-append", "cli:events-get", "cli:events-list"} <= accessors


@pytest.mark.parametrize(("args", "phrase"), [
    (("events", "append", "galaxy", "x", "decision", "b"), "scope"),
    (("events", "append", "entity", "x", "Not A Kind", "b"), "kind"),
    (("events", "append", "entity", "x", "decision", "b", "--occurred-at", "2026-03-02"),
     "occurred_at"),
    (("events", "get", "not-an-id"), "'not-an-id' is not an event id"),
    (("events", "list", "--since", "yesterday"), "since"),
    (("entries", "create", "entity", "x", "t", "s", "--importance", "9"), "importance"),
    (("entries", "create", "entity", "x", "t", "s", "--source", "compactor"), "compactor"),
    (("entries", "delete", "42"), "'42' is not an entry id"),
    (("entries", "list", "--scope", "galaxy"), "'galaxy' is not a scope"),
])
def test_bad_arguments_are_usage_errors_that_write_nothing(
        env: dict[str, str], args: tuple[str, ...], phrase: str) -> None:
    result = _run(env, *args)
    assert result.exit_code == 2, result.output
    assert phrase in result.output
    assert _rows(env, MemoryEvent) == []


def test_an_unknown_event_is_a_sentence_and_exit_1(env: dict[str, str]) -> None:
    missing = "00000000-0000-4000-8000-000000000001"
    result = _run(env, "events", "get", missing)
    assert result.exit_code == 1
    assert f"memplane: no event {missing}" in result.output


def test_entries_create_get_update_list_delete(env: dict[str, str]) -> None:
    created = _run(env, "entries", "create", "entity", "ent_acme", "Acme: ROAS target", "-",
                   "--tag", "decision", "--tag", "q3", "--importance", "4",
                   "--source", "call", stdin="Acme agreed a **ROAS target of 4**.")
    assert created.exit_code == 0, created.output
    entry = json.loads(created.stdout)
    assert (entry["title"], entry["tags"], entry["importance"], entry["source"],
            entry["key"]) == ("Acme: ROAS target", ["decision", "q3"], 4, "call", None)
    assert "summary" not in entry

    summary = _run(env, "entries", "get", entry["id"])
    assert (summary.exit_code, summary.stdout) == (0, "Acme agreed a **ROAS target of 4**.\n")

    updated = _run(env, "entries", "update", entry["id"], "--importance", "5")
    assert updated.exit_code == 0, updated.output
    after = json.loads(_run(env, "entries", "get", entry["id"], "--json").stdout)
    # Only the importance changed; the rest was kept.
    assert (after["title"], after["summary"], after["tags"], after["importance"],
            after["source"], after["version"]) == (
        "Acme: ROAS target", "Acme agreed a **ROAS target of 4**.", ["decision", "q3"], 5,
        "call", 2)

    _run(env, "entries", "create", "entity", "ent_acme", "Other", "Nothing about it",
         "--importance", "2")
    found = _run(env, "entries", "list", "--scope", "entity", "--ref", "ent_acme",
                 "--search", "roas", "--min-importance", "3", "--json")
    assert [json.loads(line) for line in found.stdout.splitlines()] == [after]
    table = _run(env, "entries", "list", "--tag", "decision")
    assert "entries (1)" in table.stdout and "Acme: ROAS target" in table.stdout
    assert entry["id"] in table.stdout

    deleted = _run(env, "entries", "delete", entry["id"])
    assert (deleted.exit_code, deleted.stdout) == (0, f"deleted entry {entry['id']}\n")
    gone = _run(env, "entries", "get", entry["id"])
    assert gone.exit_code == 1
    assert "memplane: " in gone.output
    accessors = {row.accessor_id for row in _rows(env, AccessLog)}  # type: ignore[attr-defined]
    assert {"cli:entries-create", "cli:entries-get", "cli:entries-update",
            "cli:entries-list", "cli:entries-delete"} <= accessors
