"""The ``memplane`` command: run the service and operate it.

Every command is a thin shell over importable, idempotent functions of the control plane.
Commands that work on the database directly read the same ``MEMPLANE_*`` settings as the
server (``MEMPLANE_DATA_DIR`` for the embedded default, ``MEMPLANE_DATABASE_URL`` otherwise).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._version import __version__
from . import (
    apikeys,
    compact,
    compliance,
    conversations,
    crypto,
    doctor,
    entries,
    events,
    hygiene,
    keyfiles,
    local,
    memory,
    residency,
    search,
    witness,
)
from . import knowledge as knowledge_cli
from . import remember as remember_cli

app = typer.Typer(help="memplane: memory for AI agents, content in your own bucket.",
                  no_args_is_help=True, add_completion=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"memplane {__version__}")
        raise typer.Exit()


@app.callback()
def _where(
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", envvar="MEMPLANE_DATA_DIR",
        help="The embedded default's data dir (SQLite database, bucket, keys); "
             "default ./.memplane. Commands refuse to start on one memplane did not create.")]
    = None,
    init: Annotated[bool, typer.Option(
        "--init", help="Create the data dir if there is none (instead of refusing).")]
    = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")]
    = False,
) -> None:
    """memplane: memory for AI agents, content in your own bucket.

    Commands that touch the database print which database and bucket they use (stderr)."""
    local.WHERE.data_dir, local.WHERE.init = data_dir, init


app.command("serve")(local.serve)
app.command("reconcile")(local.reconcile)
app.command("verify")(crypto.verify)
app.command("worker")(compliance.worker)
app.command("export")(compliance.export)
app.command("erase")(compliance.erase)
app.command("compact")(compact.compact)
app.command("search")(search.search)
app.command("doctor")(doctor.doctor)

receipt_app = typer.Typer(help="Signed erasure receipts.", no_args_is_help=True)
receipt_app.command("verify")(compliance.receipt_verify)
app.add_typer(receipt_app, name="receipt")

db_app = typer.Typer(help="The control-plane database.", no_args_is_help=True)
db_app.command("upgrade")(local.db_upgrade)
app.add_typer(db_app, name="db")

keys_app = typer.Typer(help="API keys and encryption keys.", no_args_is_help=True)
keys_app.command("create")(local.keys_create)
keys_app.command("list")(apikeys.keys_list)
keys_app.command("revoke")(apikeys.keys_revoke)
keys_app.command("rotate")(crypto.keys_rotate)
keys_app.command("retire-kek")(crypto.keys_retire)
keys_app.command("generate")(keyfiles.keys_generate)
app.add_typer(keys_app, name="keys")

audit_app = typer.Typer(help="The access audit log.", no_args_is_help=True)
audit_app.command("verify")(compliance.audit_verify)
audit_app.command("list")(compliance.audit_list)
app.add_typer(audit_app, name="audit")

witness_app = typer.Typer(help="A transparency-log witness the tenant runs: it cosigns the "
                          "audit log's checkpoints only while the log never forks.",
                          no_args_is_help=True)
witness_app.command("key")(witness.witness_key)
witness_app.command("serve")(witness.witness_serve)
app.add_typer(witness_app, name="witness")

memory_app = typer.Typer(help="Memories of a tenant, on the database directly (operators).",
                         no_args_is_help=True)
memory_app.command("set")(memory.memory_set)
memory_app.command("get")(memory.memory_get)
memory_app.command("list")(memory.memory_list)
memory_app.command("delete")(memory.memory_delete)
app.add_typer(memory_app, name="memory")

events_app = typer.Typer(help="The raw event log of a tenant, on the database directly "
                         "(operators).", no_args_is_help=True)
events_app.command("append")(events.events_append)
events_app.command("get")(events.events_get)
events_app.command("list")(events.events_list)
app.add_typer(events_app, name="events")

entries_app = typer.Typer(help="Curated entries of a tenant, on the database directly "
                          "(operators).", no_args_is_help=True)
entries_app.command("create")(entries.entries_create)
entries_app.command("get")(entries.entries_get)
entries_app.command("update")(entries.entries_update)
entries_app.command("delete")(entries.entries_delete)
entries_app.command("list")(entries.entries_list)
app.add_typer(entries_app, name="entries")

conversations_app = typer.Typer(help="Conversations of a tenant, on the database directly "
                                "(operators).", no_args_is_help=True)
conversations_app.command("add")(conversations.conversations_add)
conversations_app.command("show")(conversations.conversations_show)
conversations_app.command("context")(conversations.conversations_context)
app.add_typer(conversations_app, name="conversations")

storage_app = typer.Typer(help="A tenant's storage, on the database directly (operators).",
                          no_args_is_help=True)
configs_app = typer.Typer(help="Named storage configurations ('sc_…').", no_args_is_help=True)
configs_app.command("list")(residency.configs_list)
configs_app.command("show")(residency.configs_show)
configs_app.command("create")(residency.configs_create)
configs_app.command("rename")(residency.configs_rename)
configs_app.command("default")(residency.configs_default)
configs_app.command("delete")(residency.configs_delete)
storage_app.add_typer(configs_app, name="configs")
app.add_typer(storage_app, name="storage")

agents_app = typer.Typer(help="Agents and their memory settings, on the database directly "
                         "(operators).", no_args_is_help=True)
agents_app.command("set")(residency.agents_set)
agents_app.command("get")(residency.agents_get)
agents_app.command("list")(residency.agents_list)
agents_app.command("delete")(residency.agents_delete)
app.add_typer(agents_app, name="agents")
knowledge_app = typer.Typer(help="Knowledge documents of an agent, on the database directly "
                            "(operators).", no_args_is_help=True)
knowledge_app.command("add")(knowledge_cli.knowledge_add)
knowledge_app.command("list")(knowledge_cli.knowledge_list)
knowledge_app.command("delete")(knowledge_cli.knowledge_delete)
app.add_typer(knowledge_app, name="knowledge")
app.command("remember")(remember_cli.remember)

retention_app = typer.Typer(help="Retention policies and runs of a tenant, on the database "
                            "directly (operators).", no_args_is_help=True)
retention_app.command("run")(hygiene.retention_run)
retention_app.command("policies")(hygiene.retention_policies)
app.add_typer(retention_app, name="retention")
app.command("cleanup")(hygiene.cleanup)

holds_app = typer.Typer(help="Legal holds of a tenant, on the database directly "
                        "(operators).", no_args_is_help=True)
holds_app.command("list")(hygiene.holds_list)
holds_app.command("place")(hygiene.holds_place)
holds_app.command("lift")(hygiene.holds_lift)
app.add_typer(holds_app, name="holds")


_GLOBAL_FLAGS = ("--init",)
_GLOBAL_VALUED = ("--data-dir",)


def hoist_global_options(argv: list[str]) -> list[str]:
    """``memplane memory list --data-dir X`` as ``memplane --data-dir X memory list``: the
    global options are accepted after a subcommand too (moved in front of it). Nothing after
    ``--`` is touched."""
    hoisted: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        if arg in _GLOBAL_FLAGS or arg.startswith(tuple(f"{o}=" for o in _GLOBAL_VALUED)):
            hoisted.append(arg)
        elif arg in _GLOBAL_VALUED and i + 1 < len(argv):
            hoisted += argv[i:i + 2]
            i += 1
        else:
            rest.append(arg)
        i += 1
    return hoisted + rest


def main() -> None:
    import sys

    app(args=hoist_global_options(sys.argv[1:]), prog_name="memplane")
