"""``memplane remember``: extract facts from messages and reconcile them with a user's
memories, straight on the database and bucket the server uses (same ``MEMPLANE_*``
settings), through the same service as ``POST /v1/remember`` and audited like it, with the
accessor ``system``/``cli:memory-remember``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .events import text_of
from .local import load_settings, out
from .memory import TenantOpt, _session, validated

_ROLES = ("user", "assistant", "system", "tool")


def _parsed(line: str) -> dict[str, str]:
    role, sep, content = line.partition(":")
    if not sep or role.strip() not in _ROLES:
        raise typer.BadParameter(f"write each message as 'ROLE: text' with ROLE one of "
                                 f"{', '.join(_ROLES)}", param_hint="--message")
    return {"role": role.strip(), "content": content.strip()}


def _from_file(name: str) -> list[Any]:
    try:
        text = text_of(name) if name == "-" else Path(name).read_text(encoding="utf-8")
        messages = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {name} as JSON: {exc.__class__.__name__}",
                                 param_hint="--file") from None
    if isinstance(messages, dict):
        messages = messages.get("messages")
    if not isinstance(messages, list):
        raise typer.BadParameter("give a JSON list of {\"role\", \"content\"} messages (or an "
                                 "object with one under \"messages\")", param_hint="--file")
    return messages


def remember(
    user: Annotated[str, typer.Argument(help="The user the facts are about.")],
    message: Annotated[list[str] | None, typer.Option(
        "--message", "-m", help="A message as 'user: I prefer bullet points'; repeat for "
                                "several, oldest first.")] = None,
    file: Annotated[str | None, typer.Option(
        "--file", "-f", help="A JSON file of messages ([{\"role\", \"content\"}…]); '-' "
                             "reads stdin.")] = None,
    agent: Annotated[str | None, typer.Option(help="The agent writing them.")] = None,
    conversation: Annotated[str | None, typer.Option(
        help="The conversation they come from (recorded as provenance).")] = None,
    scope: Annotated[str | None, typer.Option(help="Store in this scope (default user).")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the decisions, write "
                                                            "nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]
    = False,
    tenant: TenantOpt = None,
) -> None:
    """Remember durable facts the user states (preferences, systems, role, projects …):
    each decision ADDs, UPDATEs, DELETEs (a retraction) or is NONE."""
    from control_plane.remember import service
    from control_plane.remember.schemas import RememberIn

    messages: list[Any] = (_from_file(file) if file is not None else []) + [
        _parsed(line) for line in message or []]
    if not messages:
        raise typer.BadParameter("give the messages with --message or --file")
    spec = validated(RememberIn, messages=messages, user_id=user, agent_id=agent,
                     conversation_id=conversation, scope=scope, dry_run=dry_run)
    settings = load_settings()
    with _session(tenant, "remember") as (session, plane, actor):
        answer = service.remember(session, plane, settings, actor, spec)
    if as_json:
        typer.echo(answer.model_dump_json())
        return
    table = Table(title=f"remembered for {user} ({answer.extractor}"
                        f"{', dry run' if answer.dry_run else ''})")
    for column in ("event", "key", "value", "previous", "reason"):
        table.add_column(column)
    for d in answer.decisions:
        table.add_row(d.event, d.key, d.value or "", d.previous or "", d.reason)
    out.print(table)
